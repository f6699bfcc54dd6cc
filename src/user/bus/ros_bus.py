"""`RosBus`: the Bus on rclpy, moving the same CDR bytes as `ZenohBus`. The only module importing rclpy.

rclpy is imported when a `RosBus` is made, never at module import, so the rest of the package works
without ROS. Publishing and subscribing use serialized messages (`publish(bytes)`, `raw=True`), so the
codec that runs everywhere else is also the one that runs here.

Verified only against rclpy's documented Humble API: ROS 2 cannot be installed on our CI machines.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from user.bus.base import (
    RELIABLE,
    QoS,
    RawCallback,
    ServiceError,
    ServiceHandler,
    ServiceTimeoutError,
    TokenCallback,
)
from user.config.strict import from_mapping

P = TypeVar("P")

TOKEN_TOPIC_PREFIX = "/_user/alive/k"  # presence tokens become publishers on these topics
TOKEN_POLL_S = 0.5
ROS_BUILTIN_PARAMETERS = {
    "use_sim_time"
}  # declared by rclpy itself on every node  # how often the ROS graph is polled for token changes


class RosUnavailableError(ImportError):
    """rclpy cannot be imported: ROS 2 is not installed or not sourced."""


def require_rclpy() -> Any:
    """Import rclpy, or explain how to get it (or how to do without it)."""
    try:
        import rclpy
        import rclpy.callback_groups
    except ImportError as exc:
        raise RosUnavailableError(
            "the ROS 2 runtime needs rclpy (ROS 2 Humble): `source /opt/ros/humble/setup.bash` first, "
            "or run the same nodes without ROS: `user bringup CONFIG` / `user node KIND`"
        ) from exc
    return rclpy


def token_topic(key: str) -> str:
    """A valid ROS topic name standing for a liveliness key (hex keeps any character legal)."""
    return TOKEN_TOPIC_PREFIX + key.encode().hex()


def token_key(topic: str) -> str:
    return bytes.fromhex(topic[len(TOKEN_TOPIC_PREFIX) :]).decode()


class _RosHandle:
    def __init__(self, destroy: Callable[[], Any]) -> None:
        self._destroy: Callable[[], Any] | None = destroy

    def close(self) -> None:
        if self._destroy is not None:
            destroy, self._destroy = self._destroy, None
            destroy()


class RosPublisher(_RosHandle):
    def __init__(self, node: Any, topic: str, publisher: Any) -> None:
        super().__init__(lambda: node.destroy_publisher(publisher))
        self.topic = topic
        self._publisher = publisher

    def publish(self, payload: bytes) -> None:
        self._publisher.publish(payload)  # rclpy publishes bytes as an already serialized message


class RosBus:
    """Bus over an existing `rclpy.node.Node`."""

    def __init__(self, node: Any) -> None:
        rclpy = require_rclpy()
        self.node = node
        self._clients_group = rclpy.callback_groups.ReentrantCallbackGroup()

    @property
    def name(self) -> str:
        return str(self.node.get_name())

    def _qos(self, qos: QoS) -> Any:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=qos.depth,
            reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.latched else DurabilityPolicy.VOLATILE,
        )

    @staticmethod
    def _message_class(typename: str) -> Any:
        from rosidl_runtime_py.utilities import get_message

        return get_message(typename)

    @staticmethod
    def _service_class(srv_type: str) -> Any:
        from rosidl_runtime_py.utilities import get_service

        return get_service(srv_type)

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> RosPublisher:
        pub = self.node.create_publisher(self._message_class(typename), topic, self._qos(qos))
        return RosPublisher(self.node, topic, pub)

    def create_subscription(self, topic: str, typename: str, callback: RawCallback, qos: QoS = RELIABLE) -> Any:
        sub = self.node.create_subscription(
            self._message_class(typename), topic, lambda data: callback(bytes(data)), self._qos(qos), raw=True
        )
        return _RosHandle(lambda: self.node.destroy_subscription(sub))

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        timer = self.node.create_timer(period_s, callback)
        return _RosHandle(lambda: self.node.destroy_timer(timer))

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Any:
        from rclpy.serialization import deserialize_message, serialize_message

        cls = self._service_class(srv_type)

        def on_request(request: Any, _response: Any) -> Any:
            return deserialize_message(handler(serialize_message(request)), cls.Response)

        srv = self.node.create_service(cls, name, on_request)
        return _RosHandle(lambda: self.node.destroy_service(srv))

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        from rclpy.serialization import deserialize_message, serialize_message

        cls = self._service_class(srv_type)
        client = self.node.create_client(cls, name, callback_group=self._clients_group)
        try:
            if not client.wait_for_service(timeout_sec=timeout_s):
                raise ServiceError(f"no server for service {name} ({srv_type})")
            done = threading.Event()
            future = client.call_async(deserialize_message(request, cls.Request))
            future.add_done_callback(lambda _f: done.set())
            if not done.wait(timeout_s):
                future.cancel()
                raise ServiceTimeoutError(f"service {name} ({srv_type}) did not answer within {timeout_s:.1f} s")
            if future.exception() is not None:
                raise ServiceError(f"service {name} failed: {future.exception()}")
            return bytes(serialize_message(future.result()))
        finally:
            self.node.destroy_client(client)

    def declare_parameters(self, spec: type[P]) -> P:
        """Declare each field as a ROS parameter (description from the field), then validate them all."""
        from rcl_interfaces.msg import ParameterDescriptor

        from user.deploy.commands import flatten, unflatten

        defaults: dict[str, Any] = {}
        for f in dataclasses.fields(spec):  # type: ignore[arg-type]
            if f.default is not dataclasses.MISSING:
                defaults[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                defaults[f.name] = f.default_factory()
        docs = {f.name: str(f.metadata.get("doc", "")) for f in dataclasses.fields(spec)}  # type: ignore[arg-type]
        values: dict[str, Any] = {}
        for name, default in flatten(defaults).items():
            if self.node.has_parameter(name):  # declared from the launch file's overrides
                values[name] = self.node.get_parameter(name).value
                continue
            descriptor = ParameterDescriptor(description=docs.get(name.split(".")[0], ""), dynamic_typing=True)
            values[name] = self.node.declare_parameter(name, default, descriptor).value
        for name, param in self.node.get_parameters_by_prefix("").items():
            if name not in ROS_BUILTIN_PARAMETERS:
                values.setdefault(name, param.value)  # keys the spec does not know are rejected below
        return from_mapping(spec, unflatten(values), where=f"parameters of node {self.name!r}")

    def declare_token(self, key: str) -> Any:
        from std_msgs.msg import Empty

        pub = self.node.create_publisher(Empty, token_topic(key), self._qos(RELIABLE))
        return _RosHandle(lambda: self.node.destroy_publisher(pub))

    def watch_tokens(self, prefix: str, callback: TokenCallback) -> Any:
        known: set[str] = set()

        def poll() -> None:
            alive = set()
            for topic, _types in self.node.get_topic_names_and_types():
                if topic.startswith(TOKEN_TOPIC_PREFIX) and self.node.count_publishers(topic) > 0:
                    key = token_key(topic)
                    if key.startswith(prefix):
                        alive.add(key)
            for key in sorted(alive - known):
                callback(key, True)
            for key in sorted(known - alive):
                callback(key, False)
            known.clear()
            known.update(alive)

        poll()
        timer = self.node.create_timer(TOKEN_POLL_S, poll)
        return _RosHandle(lambda: self.node.destroy_timer(timer))

    def count_subscribers(self, topic: str, timeout_s: float = 0.5) -> int:
        del timeout_s  # rclpy answers from its local graph cache
        return int(self.node.count_subscribers(topic))

    def topic_names_and_types(self, timeout_s: float = 0.5) -> dict[str, list[str]]:
        return {name: list(types) for name, types in self.node.get_topic_names_and_types()}

    def close(self) -> None:
        self.node.destroy_node()
