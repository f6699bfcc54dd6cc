"""An in-process bus for weight-sync unit tests: synchronous delivery, latched history, timers fired by hand.

Several `LoopbackBus`es on one `Loopback` see each other's topics, like nodes on one Zenoh router, but a
publication is delivered before `publish` returns, so tests need no waiting. Latched topics keep their last
`depth` messages for late subscribers (transient local); `drop` loses chosen messages on the way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from user.bus.base import RELIABLE, QoS, RawCallback, ServiceHandler, TokenCallback

P = TypeVar("P")


@dataclass
class Declared:
    """A publisher, subscription or timer declared on a `LoopbackBus`; `close()` undeclares it."""

    kind: str  # "publisher", "subscription" or "timer"
    topic: str  # the timer's period for timers, as text
    typename: str
    qos: QoS
    callback: Callable[..., None] | None = None
    closed: bool = False
    on_close: Callable[[], None] = field(default=lambda: None)

    def close(self) -> None:
        self.closed = True
        self.on_close()


class LoopbackPublisher:
    def __init__(self, net: Loopback, declared: Declared) -> None:
        self.topic = declared.topic
        self._net = net
        self.declared = declared

    def publish(self, payload: bytes) -> None:
        if self.declared.closed:
            raise RuntimeError(f"publish on closed publisher of {self.topic}")
        self._net.deliver(self.declared, payload)

    def close(self) -> None:
        self.declared.close()


class Loopback:
    """The shared medium of several buses."""

    def __init__(self) -> None:
        self.declared: list[Declared] = []
        self.history: dict[str, deque[bytes]] = {}
        self.sent: list[tuple[str, bytes]] = []  # every publication, in order
        self.drop: Callable[[str, bytes], bool] = lambda topic, payload: False

    def bus(self, name: str) -> LoopbackBus:
        return LoopbackBus(name, self)

    def deliver(self, publisher: Declared, payload: bytes) -> None:
        self.sent.append((publisher.topic, payload))
        if publisher.qos.latched:
            self.history.setdefault(publisher.topic, deque(maxlen=publisher.qos.depth)).append(payload)
        if self.drop(publisher.topic, payload):
            return
        for sub in list(self.declared):
            if sub.kind == "subscription" and not sub.closed and sub.topic == publisher.topic and sub.callback:
                sub.callback(payload)

    def find(self, kind: str, topic: str | None = None) -> list[Declared]:
        return [d for d in self.declared if d.kind == kind and (topic is None or d.topic == topic)]

    def fire_timers(self) -> None:
        for timer in self.find("timer"):
            if not timer.closed and timer.callback:
                timer.callback()


class LoopbackBus:
    """A `Bus` whose publishers, subscriptions and timers (what weight sync uses) work; the rest raises."""

    def __init__(self, name: str, net: Loopback) -> None:
        self.name = name
        self.net = net

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> LoopbackPublisher:
        declared = Declared("publisher", topic, typename, qos)
        self.net.declared.append(declared)
        return LoopbackPublisher(self.net, declared)

    def create_subscription(self, topic: str, typename: str, callback: RawCallback, qos: QoS = RELIABLE) -> Declared:
        declared = Declared("subscription", topic, typename, qos, callback)
        self.net.declared.append(declared)
        if qos.latched:
            for payload in list(self.net.history.get(topic, ())):
                callback(payload)
        return declared

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Declared:
        declared = Declared("timer", str(period_s), "", RELIABLE, callback)
        self.net.declared.append(declared)
        return declared

    def close(self) -> None:
        for d in self.net.declared:
            d.closed = True

    def _unsupported(self, what: str) -> NoReturn:
        raise NotImplementedError(f"LoopbackBus has no {what}")

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Declared:
        self._unsupported("services")

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        self._unsupported("services")

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        self._unsupported("parameters")

    def set_parameters(self, changes: Mapping[str, Any]) -> None:
        self._unsupported("parameters")

    def declare_token(self, key: str) -> Declared:
        self._unsupported("tokens")

    def watch_tokens(self, prefix: str, callback: TokenCallback) -> Declared:
        self._unsupported("tokens")

    def topic_names_and_types(self, timeout_s: float = 0.5) -> dict[str, list[str]]:
        self._unsupported("graph queries")

    def count_subscribers(self, topic: str, timeout_s: float = 0.5) -> int:
        self._unsupported("graph queries")


@dataclass
class FakeTime:
    """Stands in for the `time` module of the code under test: a monotonic clock moved by hand."""

    now: float = 1000.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        import time

        return getattr(time, name)
