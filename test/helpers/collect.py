"""A subscription that keeps every payload it receives, for tests."""

from __future__ import annotations

import threading

from user.bus.base import RELIABLE, Bus, QoS


def collect(bus: Bus, topic: str, typename: str, qos: QoS = RELIABLE) -> list[bytes]:
    """Subscribe `bus` to `topic`; the returned list grows with every payload (appends are atomic)."""
    got: list[bytes] = []
    lock = threading.Lock()

    def on(payload: bytes) -> None:
        with lock:
            got.append(payload)

    bus.create_subscription(topic, typename, on, qos)
    return got
