"""What only the Zenoh runtime has: the zenoh-bridge-ros2dds key convention, routers, node names.

The Bus contract itself (pub/sub, QoS, services, timers, parameters, tokens, graph) runs on both runtimes
in test_bus_contract.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import zenoh

from test.conftest import free_port, wait_until
from user.bus.base import (
    RouterUnreachableError,
)
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings

MakeBus = Callable[..., ZenohBus]


def _collector() -> tuple[list[bytes], threading.Event, Callable[[bytes], None]]:
    got: list[bytes] = []
    event = threading.Event()

    def on(payload: bytes) -> None:
        got.append(payload)
        event.set()

    return got, event, on


def _wait_matched(pub: object, timeout_s: float = 5.0) -> None:
    assert pub.wait_for_subscribers(timeout_s)  # type: ignore[attr-defined]


def test_raw_zenoh_session_sees_bus_messages_on_the_bridge_key(
    make_bus: MakeBus, topic: str, router_endpoint: str
) -> None:
    """Key = topic without the leading '/', payload unchanged: what zenoh-bridge-ros2dds speaks."""
    from user.bus.zenoh_config import session_config

    raw = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    try:
        got, event, on = _collector()
        sub = raw.declare_subscriber(topic.lstrip("/"), lambda s: on(s.payload.to_bytes()))
        pub = make_bus("a").create_publisher(topic, "std_msgs/msg/String")
        _wait_matched(pub)
        pub.publish(b"\x00\x01\x00\x00payload")
        assert event.wait(5.0)
        assert got == [b"\x00\x01\x00\x00payload"]
        sub.undeclare()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated
    finally:
        raw.close()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated


def test_no_router_fails_fast_and_clearly() -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(RouterUnreachableError) as err:
        ZenohBus("lonely", ZenohSettings(router=[endpoint], router_timeout_s=0.5))
    assert time.monotonic() - start < 5.0
    assert endpoint in str(err.value) and "user router" in str(err.value) and "lonely" in str(err.value)


def test_node_names_are_listed(make_bus: MakeBus) -> None:
    make_bus("graph_a"), make_bus("graph_b")
    assert wait_until(lambda: {"graph_a", "graph_b"} <= set(make_bus("graph_c").node_names(0.5)), 5.0)
