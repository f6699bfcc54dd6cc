"""`RosBus`: the Bus on rclpy, moving the same CDR bytes as `ZenohBus`. With `ros_services` (serving and
calling services), `ros_node_params` (settings as ROS parameters), `ros_runtime` (a node spun on threads) and
`ros_types` (QoS, descriptors, token topics), the only code importing rclpy.

rclpy is imported when a `RosBus` is made, never at module import, so the rest of the package works
without ROS. Publishing and subscribing use serialized messages (`publish(bytes)`, `raw=True`), so the
codec that runs everywhere else is also the one that runs here. Code here uses only rclpy names that
exist on Humble (checked by test/bus/test_ros_humble_api.py against `rclpy-humble-api.txt`).

Semantics kept from the Bus contract:
- callbacks of one bus never run concurrently: subscriptions, timers, services, presence polls and
  parameter changes all sit in the node's default (mutually exclusive) callback group, spun by a
  single-threaded executor (rclpy's multi-threaded one costs about 4 ms per message here); service clients
  live on a second, hidden node with its own executor thread, so a callback may wait on a service call;
  an `OwnThread` service lives on a third hidden node (`_<name>_services`, made on first use) spun by the
  bus's own executor thread, so its handler may wait while the node's callbacks go on;
- an exception in a callback is logged with its traceback and the node keeps running;
- every service call has a deadline, and each service has one long-lived client;
- settings are declared as typed, described ROS parameters (`user.bus.ros_params`), read-only unless live.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from user.bus.base import RELIABLE, BusClosedError, QoS, RawCallback, ServiceHandler, TokenCallback, describe
from user.bus.ros_node_params import RosNodeParameters
from user.bus.ros_services import RosServices
from user.bus.ros_types import TOKEN_TOPIC_PREFIX, RosHandle, require_rclpy, ros_qos, token_key, token_topic

P = TypeVar("P")

TOKEN_POLL_S = 0.5  # how often the ROS graph is polled for token changes

_log = logging.getLogger(__name__)


class RosPublisher(RosHandle):
    def __init__(self, node: Any, topic: str, publisher: Any) -> None:
        super().__init__(lambda: node.destroy_publisher(publisher))
        self.topic = topic
        self._publisher = publisher
        self.publish = publisher.publish  # rclpy publishes bytes as an already serialized message

    def wait_for_subscribers(self, timeout_s: float) -> bool:
        """Wait until at least one subscription matches; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        while self._publisher.get_subscription_count() == 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


class RosBus:
    """Bus over an existing `rclpy.node.Node` spun by someone else's executor (see `RosRuntime`).

    `client_node` holds the service clients and must be spun on another thread than `node`, so that a
    callback of `node` can wait for a response; without it the clients sit on `node` in a reentrant group,
    which needs a multi-threaded executor."""

    def __init__(self, node: Any, client_node: Any = None) -> None:
        rclpy = require_rclpy()
        self.node = node
        self._group = node.default_callback_group  # mutually exclusive: our callbacks never overlap
        self.client_node = client_node if client_node is not None else node
        clients_group = (
            client_node.default_callback_group
            if client_node is not None
            else rclpy.callback_groups.ReentrantCallbackGroup()
        )
        self._services = RosServices(node, self._group, self.client_node, clients_group)
        self._parameters = RosNodeParameters(node)
        self._closed = False
        self._name = str(node.get_name())

    @property
    def name(self) -> str:
        return self._name

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosedError(f"bus of node {self._name!r} is closed")

    def _guarded(self, callback: Callable[..., Any], what: str) -> Callable[..., Any]:
        """`callback`, with an exception logged instead of ending the executor's spin."""
        name = self.name

        def run(*args: Any) -> Any:
            try:
                return callback(*args)
            except Exception:
                _log.exception("node %s: callback %s for %s raised", name, describe(callback), what)
                return None

        return run

    @staticmethod
    def _message_class(typename: str) -> Any:
        from rosidl_runtime_py.utilities import get_message

        return get_message(typename)

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> RosPublisher:
        self._check_open()
        pub = self.node.create_publisher(self._message_class(typename), topic, ros_qos(qos))
        return RosPublisher(self.node, pub.topic_name, pub)

    def create_subscription(self, topic: str, typename: str, callback: RawCallback, qos: QoS = RELIABLE) -> Any:
        self._check_open()
        guarded = self._guarded(callback, f"topic {topic}")
        sub = self.node.create_subscription(
            self._message_class(typename),
            topic,
            lambda data: guarded(bytes(data)),
            ros_qos(qos),
            callback_group=self._group,
            raw=True,
        )
        return RosHandle(lambda: self.node.destroy_subscription(sub))

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        self._check_open()
        if period_s <= 0:
            raise ValueError(f"timer period must be positive, got {period_s}")
        timer = self.node.create_timer(period_s, self._guarded(callback, "a timer"), callback_group=self._group)
        return RosHandle(lambda: self.node.destroy_timer(timer))

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Any:
        self._check_open()
        return self._services.create(name, srv_type, handler)

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        """Send a request and return the response bytes; never waits longer than `timeout_s`."""
        self._check_open()
        return self._services.call(name, srv_type, request, timeout_s)

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        """Declare each leaf setting as a typed ROS parameter with its descriptor; return the settings
        (`RosNodeParameters.declare`)."""
        return self._parameters.declare(spec, on_change)

    def set_parameters(self, changes: Mapping[str, Any]) -> None:
        self._parameters.set(changes)

    def declare_token(self, key: str) -> Any:
        self._check_open()
        from std_msgs.msg import Empty

        pub = self.node.create_publisher(Empty, token_topic(key), ros_qos(RELIABLE))
        return RosHandle(lambda: self.node.destroy_publisher(pub))

    def _alive_tokens(self, prefix: str) -> set[str]:
        alive = set()
        for topic, _types in self.node.get_topic_names_and_types():
            if topic.startswith(TOKEN_TOPIC_PREFIX) and self.node.count_publishers(topic) > 0:
                key = token_key(topic)
                if key.startswith(prefix):
                    alive.add(key)
        return alive

    def watch_tokens(self, prefix: str, callback: TokenCallback) -> Any:
        self._check_open()
        known: set[str] = set()
        guarded = self._guarded(callback, f"tokens {prefix}")

        def poll() -> None:
            alive = self._alive_tokens(prefix)
            for key in sorted(alive - known):
                guarded(key, True)
            for key in sorted(known - alive):
                guarded(key, False)
            known.clear()
            known.update(alive)

        def first_poll() -> None:  # the current tokens come first, on the executor like every other callback
            first.cancel()
            poll()

        timer = self.node.create_timer(TOKEN_POLL_S, poll, callback_group=self._group)
        first = self.node.create_timer(0.001, first_poll, callback_group=self._group)

        def destroy() -> None:
            self.node.destroy_timer(first)
            self.node.destroy_timer(timer)

        return RosHandle(destroy)

    def count_subscribers(self, topic: str, timeout_s: float = 0.5) -> int:
        del timeout_s  # rclpy answers from its local graph cache
        return int(self.node.count_subscribers(topic))

    def topic_names_and_types(self, timeout_s: float = 0.5) -> dict[str, list[str]]:
        del timeout_s
        return {
            name: sorted(types)
            for name, types in sorted(self.node.get_topic_names_and_types())
            if not name.startswith(TOKEN_TOPIC_PREFIX)
        }

    def close(self) -> None:
        """Destroy the node (and the clients' node). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._services.close()
        if self.client_node is not self.node:
            self.client_node.destroy_node()
        self.node.destroy_node()
