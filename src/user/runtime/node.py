"""`Node`: what every node class derives from. It types the Bus: messages in, messages out.

Decoding happens here, once: a malformed payload is logged with its topic and type and dropped, and the
node keeps running.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from user.bus.base import RELIABLE, Bus, Handle, QoS, RawPublisher
from user.interfaces.codec import Codec, DecodeError, default_codec
from user.runtime.clock import NodeClock
from user.runtime.diagnostics import ERROR, OK, WARN, Status

P = TypeVar("P")


class TypedPublisher:
    """Encodes messages of one type and publishes them on one topic."""

    def __init__(self, raw: RawPublisher, typename: str, codec: Codec) -> None:
        self.raw = raw
        self.typename = typename
        self._codec = codec

    @property
    def topic(self) -> str:
        return self.raw.topic

    def publish(self, msg: Any) -> None:
        self.raw.publish(self._codec.encode(msg, self.typename))

    def close(self) -> None:
        self.raw.close()


class Node:
    """Base of all nodes. Subclasses declare parameters, publishers, subscriptions and timers in `__init__`, open
    what they drive in `configure()` (connect hardware), start their own work in `activate()` (a control thread),
    and release it all in `destroy()`. A runner makes the node, then calls `started` (both steps), like a ROS 2
    lifecycle node's configure and activate transitions."""

    def __init__(self, bus: Bus, codec: Codec | None = None) -> None:
        self.bus = bus
        self.codec = codec or default_codec()
        self.log = logging.getLogger(f"user.{bus.name}")
        self.malformed_messages = 0  # payloads dropped because they did not decode
        self.failure: str | None = None  # why the node cannot go on, once it failed (see `fail`)
        self.completed: str | None = None  # why the run is complete, once it is (see `complete`)
        self.request_stop: Callable[[], None] = lambda: None  # the runner's: ends the node's process
        self.stamp_clock = NodeClock(self)  # the wall clock, or the deployment's simulation time (USER_SIM_CLOCK)

    def fail(self, reason: str) -> None:
        """The node cannot do its work any more (its control thread died, training stopped): say so once and end
        the process as failed, so its launcher respawns it or reports it gone, instead of a live process that
        does nothing. A respawned learner resumes from its last good checkpoint."""
        if self.failure is not None:
            return
        self.failure = reason
        self.log.error("node %s failed: %s", self.name, reason)
        self.request_stop()

    def complete(self, reason: str) -> None:
        """The run this node drives is complete (a learner reached its `stop_after`): say so once and end the
        process with the run-complete exit code, on which its launcher stops the whole deployment cleanly."""
        if self.completed is not None or self.failure is not None:
            return
        self.completed = reason
        self.log.info("node %s: the run is complete: %s", self.name, reason)
        self.request_stop()

    def now_ns(self) -> int:
        """The time to stamp messages with (`user.runtime.clock`)."""
        return self.stamp_clock.now_ns()

    @property
    def name(self) -> str:
        return self.bus.name

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        """The node's settings (see `Bus.declare_parameters`); `on_change` applies live ones while it runs."""
        return self.bus.declare_parameters(spec, on_change)

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> TypedPublisher:
        name = self.codec.resolve(typename)
        return TypedPublisher(self.bus.create_publisher(topic, name, qos), name, self.codec)

    def create_subscription(
        self, topic: str, typename: str, callback: Callable[[Any], None], qos: QoS = RELIABLE
    ) -> Handle:
        """Decoded messages of `topic` to `callback`; a malformed message is dropped, counted and logged."""
        return self.create_payload_subscription(topic, typename, lambda msg, _payload: callback(msg), qos)

    def create_payload_subscription(
        self, topic: str, typename: str, callback: Callable[[Any, bytes], None], qos: QoS = RELIABLE
    ) -> Handle:
        """As `create_subscription`, but `callback(msg, payload)` also gets the CDR bytes `msg` was decoded
        from, for a node that stores or forwards them as they arrived instead of encoding `msg` again."""
        name = self.codec.resolve(typename)

        def on_bytes(payload: bytes) -> None:
            try:
                msg = self.codec.decode(payload, name)
            except DecodeError as exc:
                self.malformed_messages += 1
                self.log.error(
                    "dropped a malformed message on %s (%s, %d bytes): %s", topic, name, len(payload), exc.reason
                )
                return
            callback(msg, payload)

        return self.bus.create_subscription(topic, name, on_bytes, qos)

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Handle:
        return self.bus.create_timer(period_s, callback)

    def create_service(self, name: str, srv_type: str, handler: Callable[[Any], Any]) -> Handle:
        """Serve `srv_type` ("pkg/srv/Name"); `handler` takes the request message, returns the response."""
        req_type, resp_type = f"{srv_type}_Request", f"{srv_type}_Response"

        def on_request(payload: bytes) -> bytes:
            request = self.codec.decode(payload, req_type)
            return self.codec.encode(handler(request), resp_type)

        return self.bus.create_service(name, srv_type, on_request)

    def call_service(self, name: str, srv_type: str, request: Any, timeout_s: float) -> Any:
        """Call a service and return its decoded response. Raises `ServiceError`/`ServiceTimeoutError`."""
        payload = self.codec.encode(request, f"{srv_type}_Request")
        return self.codec.decode(self.bus.call_service(name, srv_type, payload, timeout_s), f"{srv_type}_Response")

    def diagnostics(self) -> list[Status]:
        """How this node is, for `/diagnostics` (`user.runtime.diagnostics`): its own line; node kinds add the
        state of what they own (a robot's arm and cameras, the learner's training and buffer)."""
        values = {"kind": type(self).__name__, "malformed_messages": self.malformed_messages}
        if self.failure is not None:
            return [Status(f"{self.name}: node", ERROR, f"failed: {self.failure}", values)]
        if self.malformed_messages:
            return [Status(f"{self.name}: node", WARN, f"dropped {self.malformed_messages} malformed messages", values)]
        return [Status(f"{self.name}: node", OK, "running", values)]

    def configure(self) -> None:
        """Open what the node drives (connect its hardware): once, after `__init__`, before `activate`. A failure
        here is a failure to start, as one in `__init__`; `destroy` still runs. Nothing by default."""

    def activate(self) -> None:
        """Start the node's own work (a control thread): once, after `configure`. Nothing by default."""

    def destroy(self) -> None:
        """Release devices and resources (whichever of `configure` and `activate` ran). The runtime closes the
        bus afterwards."""


NodeT = TypeVar("NodeT", bound=Node)


def started(node: NodeT) -> NodeT:
    """`node` configured and activated, as a runner starts it (a test that makes a node in process does the same)."""
    node.configure()
    node.activate()
    return node
