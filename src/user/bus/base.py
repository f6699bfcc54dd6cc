"""The `Bus` protocol every node is written against, with its QoS profiles and errors.

A bus moves serialized CDR bytes; typing (encode/decode) happens one layer up, in `user.runtime`.
Callbacks of one bus never run concurrently (like a ROS 2 single-threaded executor), with one exception a
node asks for: a service handler wrapped in `OwnThread` runs on the bus's service thread, beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

P = TypeVar("P")

RawCallback = Callable[[bytes], None]  # receives one message's CDR bytes
ServiceHandler = Callable[[bytes], bytes]  # CDR request bytes -> CDR response bytes
TokenCallback = Callable[[str, bool], None]  # (token key, alive)


@dataclass(frozen=True)
class OwnThread:
    """A service handler that waits (for a worker of the node to finish what the request asked), run on the
    bus's service thread instead of under the callback lock, so that subscriptions, timers and other
    services go on meanwhile: `bus.create_service(name, srv_type, OwnThread(handler))`.

    The requests of all `OwnThread` services of one bus are handled one at a time, in arrival order, beside
    the node's other callbacks: the handler guards what it shares with them. A bus without a service thread
    (a test double) may call it like any handler."""

    handler: ServiceHandler

    def __call__(self, request: bytes) -> bytes:
        return self.handler(request)


class BusError(RuntimeError):
    """Base class of transport errors."""


class BusClosedError(BusError):
    """The bus was used after `close()`."""


class RouterUnreachableError(BusError):
    """No Zenoh router answered at the configured endpoints within the deadline."""


class ServiceError(BusError):
    """A service call failed: no server, or the server reported an error."""


class ServiceTimeoutError(ServiceError):
    """No reply to a service call within its deadline."""


@dataclass(frozen=True)
class QoS:
    """Delivery guarantees of a topic (a subset of ROS 2 QoS that maps 1:1 onto Zenoh)."""

    reliable: bool = True  # True: nothing dropped, publishers block when congested (Zenoh BLOCK)
    latched: bool = False  # transient local: a late subscriber receives the last `depth` messages
    depth: int = 10  # history depth; for latched topics, how many messages late joiners get
    express: bool = False  # send at once instead of batching (lower latency, lower throughput)


RELIABLE = QoS()  # transitions, weights, commands: must arrive
BEST_EFFORT = QoS(reliable=False, depth=1)  # high-rate sensor data where the latest sample is what matters
LATCHED = QoS(latched=True, depth=1)  # descriptors, configuration: late joiners get the last value


class Handle(Protocol):
    """Something declared on the bus that can be undeclared."""

    def close(self) -> None: ...


class RawPublisher(Protocol):
    topic: str

    def publish(self, payload: bytes) -> None: ...

    def close(self) -> None: ...


class Bus(Protocol):
    """Transport for one node. Both `ZenohBus` and `RosBus` implement it."""

    @property
    def name(self) -> str:
        """The node name."""
        ...

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> RawPublisher: ...

    def create_subscription(self, topic: str, typename: str, callback: RawCallback, qos: QoS = RELIABLE) -> Handle: ...

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Handle: ...

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Handle:
        """Serve `srv_type`: `handler` turns request bytes into response bytes, under the callback lock like
        any callback, or on the service thread when it is an `OwnThread`."""
        ...

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes: ...

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        """Declare the fields of dataclass `spec` as parameters; return their values (overrides applied).

        Settings marked `live` may then change while the node runs: `on_change` gets the whole new settings
        object (inside a callback, like any other) and raises `ConfigError` to refuse it. Without
        `on_change` every parameter is read-only."""
        ...

    def set_parameters(self, changes: Mapping[str, Any]) -> None:
        """Change parameters of this node by dotted name, as `ros2 param set` does; all or nothing.
        Raises `user.bus.parameters.ParameterRefusedError` naming the parameter and the reason."""
        ...

    def declare_token(self, key: str) -> Handle:
        """Announce presence under `key` until the handle is closed or the process dies."""
        ...

    def watch_tokens(self, prefix: str, callback: TokenCallback) -> Handle:
        """Call back on each token under `prefix` appearing (True) or gone (False), current ones first."""
        ...

    def topic_names_and_types(self, timeout_s: float = 0.5) -> dict[str, list[str]]:
        """Topics currently published or subscribed anywhere, with their types."""
        ...

    def count_subscribers(self, topic: str, timeout_s: float = 0.5) -> int:
        """Subscriptions to `topic` anywhere in the graph (as rclpy's Node.count_subscribers)."""
        ...

    def close(self) -> None: ...


def describe(obj: Any) -> str:
    """Short printable name of a callback for log messages."""
    return getattr(obj, "__qualname__", None) or type(obj).__name__
