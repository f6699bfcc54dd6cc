"""`RosBus`: the Bus on rclpy, moving the same CDR bytes as `ZenohBus`. With `ros_runtime` (a node spun on
threads) and `ros_types` (QoS, descriptors, token topics), the only code importing rclpy.

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

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from user.bus.base import (
    RELIABLE,
    BusClosedError,
    OwnThread,
    QoS,
    RawCallback,
    ServiceError,
    ServiceHandler,
    ServiceTimeoutError,
    TokenCallback,
    describe,
)
from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.ros_params import RosParam, decode, ros_params
from user.bus.ros_types import (
    TOKEN_TOPIC_PREFIX,
    parameter_descriptor,
    require_rclpy,
    ros_param_type,
    ros_qos,
    token_key,
    token_topic,
)
from user.config.strict import ConfigError, from_mapping

P = TypeVar("P")

TOKEN_POLL_S = 0.5  # how often the ROS graph is polled for token changes
# Declared by rclpy itself on every node (Humble: use_sim_time; Jazzy adds the type description service).
ROS_BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
SERVICE_POLL_S = 0.02  # how often a call waits between checks for a server
SERVICE_THREAD_JOIN_S = 2.0  # how long closing the bus waits for a running `OwnThread` handler

_log = logging.getLogger(__name__)


def _spin(executor: Any) -> None:
    from rclpy.executors import ExternalShutdownException

    with contextlib.suppress(ExternalShutdownException):  # the context was shut down under us
        executor.spin()


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
        self._clients_group = (
            client_node.default_callback_group
            if client_node is not None
            else rclpy.callback_groups.ReentrantCallbackGroup()
        )
        self._clients: dict[tuple[str, str], Any] = {}
        self._clients_lock = threading.Lock()
        self._store: ParameterStore[Any] | None = None
        self._closed = False
        self._name = str(node.get_name())
        self._service_node: Any = None  # `OwnThread` services: a hidden node, spun by `_service_spin`
        self._service_spin: tuple[Any, threading.Thread] | None = None

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

    @staticmethod
    def _service_class(srv_type: str) -> Any:
        from rosidl_runtime_py.utilities import get_service

        return get_service(srv_type)

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
        return _RosHandle(lambda: self.node.destroy_subscription(sub))

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        self._check_open()
        if period_s <= 0:
            raise ValueError(f"timer period must be positive, got {period_s}")
        timer = self.node.create_timer(period_s, self._guarded(callback, "a timer"), callback_group=self._group)
        return _RosHandle(lambda: self.node.destroy_timer(timer))

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Any:
        self._check_open()
        from rclpy.serialization import deserialize_message, serialize_message

        cls = self._service_class(srv_type)
        node_name = self.name

        def on_request(request: Any, response: Any) -> Any:
            try:
                return deserialize_message(handler(serialize_message(request)), cls.Response)
            except Exception:
                # ROS services have no error reply: the caller gets an empty response, the log says why
                _log.exception("node %s: service %s handler raised", node_name, name)
                return response

        if isinstance(handler, OwnThread):
            node = self._own_thread_node()
            srv = node.create_service(cls, self.node.resolve_service_name(name), on_request)
            return _RosHandle(lambda: node.destroy_service(srv))
        srv = self.node.create_service(cls, name, on_request, callback_group=self._group)
        return _RosHandle(lambda: self.node.destroy_service(srv))

    def _own_thread_node(self) -> Any:
        """The hidden node of `OwnThread` services, spun on a thread of its own (made on first use)."""
        with self._clients_lock:
            if self._service_node is None:
                rclpy, ctx = require_rclpy(), self.node.context
                self._service_node = rclpy.node.Node(
                    f"_{self._name}_services", context=ctx, namespace=self.node.get_namespace(),
                    use_global_arguments=False, start_parameter_services=False, enable_rosout=False,
                )  # fmt: skip
                executor = rclpy.executors.SingleThreadedExecutor(context=ctx)
                executor.add_node(self._service_node)
                thread = threading.Thread(target=_spin, args=(executor,), name=f"{self._name}-services", daemon=True)
                thread.start()
                self._service_spin = (executor, thread)
            return self._service_node

    def _client(self, name: str, srv_type: str) -> tuple[Any, Any]:
        """The long-lived client of a service (made on first use), named as the main node resolves it."""
        cls = self._service_class(srv_type)
        name = self.node.resolve_service_name(name)
        with self._clients_lock:
            client = self._clients.get((name, srv_type))
            if client is None:
                client = self.client_node.create_client(cls, name, callback_group=self._clients_group)
                self._clients[(name, srv_type)] = client
        return client, cls

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        """Send a request and return the response bytes; never waits longer than `timeout_s`."""
        self._check_open()
        from rclpy.serialization import deserialize_message, serialize_message

        deadline = time.monotonic() + timeout_s
        client, cls = self._client(name, srv_type)
        while not client.service_is_ready():
            if time.monotonic() >= deadline:
                raise ServiceError(f"no server for service {name} ({srv_type})")
            time.sleep(SERVICE_POLL_S)
        done = threading.Event()
        future = client.call_async(deserialize_message(request, cls.Request))
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(max(0.0, deadline - time.monotonic())):
            client.remove_pending_request(future)
            future.cancel()
            raise ServiceTimeoutError(f"service {name} ({srv_type}) did not answer within {timeout_s:.1f} s")
        if future.exception() is not None:
            raise ServiceError(f"service {name} failed: {future.exception()}")
        return bytes(serialize_message(future.result()))

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        """Declare each leaf setting as a typed ROS parameter with its descriptor; return the settings.

        The node was made with `automatically_declare_parameters_from_overrides`, so what the launch file or
        `--ros-args -p` gave is declared already (untyped): it is read, checked with the settings' own
        rules, then declared again with its descriptor. A parameter the settings do not know is an error."""
        where = f"parameters of node {self.name!r}"
        table = ros_params(spec)
        given = {
            name: p.value
            for name, p in self.node.get_parameters_by_prefix("").items()
            if name not in ROS_BUILTIN_PARAMETERS
        }
        values = from_mapping(spec, decode(table, given), where=where)  # unknown names fail here
        current = {p.name: p.default for p in ros_params(spec, default=values)}
        for name in given:  # declared from the overrides, untyped: declared again below, typed
            self.node.undeclare_parameter(name)  # (keys of a free-form mapping live in its YAML parameter)
        for param in table:
            self._declare(param, current[param.name])
        self._store = ParameterStore(spec, values, on_change, where)
        self.node.add_on_set_parameters_callback(self._on_set_parameters)
        return values

    def _declare(self, param: RosParam, value: Any) -> None:
        descriptor = parameter_descriptor(param)
        try:
            if value is None:  # typed, without a value: the setting's default is None or empty
                self.node.declare_parameter(param.name, ros_param_type(param.kind), descriptor, ignore_override=True)
            else:
                self.node.declare_parameter(param.name, value, descriptor, ignore_override=True)
        except Exception as exc:  # rclpy's InvalidParameter* exceptions; the message names the parameter
            raise ConfigError(f"parameters of node {self.name!r}: {param.name}: {exc}") from exc

    def _on_set_parameters(self, parameters: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        if self._store is None:
            return SetParametersResult(successful=True)
        try:
            self._store.apply({p.name: p.value for p in parameters})
        except ParameterRefusedError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def set_parameters(self, changes: Mapping[str, Any]) -> None:
        from rclpy.parameter import Parameter

        if self._store is None:
            raise ParameterRefusedError(f"node {self.name!r} has declared no parameters")
        self._store.check(changes)  # the reason in our words before rclpy's
        table = self._store.table
        params = [Parameter(name, ros_param_type(table[name].kind), value) for name, value in changes.items()]
        result = self.node.set_parameters_atomically(params)
        if not result.successful:
            raise ParameterRefusedError(result.reason)

    def parameter_values(self) -> dict[str, Any]:
        return self._store.current() if self._store is not None else {}

    def declare_token(self, key: str) -> Any:
        self._check_open()
        from std_msgs.msg import Empty

        pub = self.node.create_publisher(Empty, token_topic(key), ros_qos(RELIABLE))
        return _RosHandle(lambda: self.node.destroy_publisher(pub))

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

        return _RosHandle(destroy)

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
        with self._clients_lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            self.client_node.destroy_client(client)
        if self._service_spin is not None:
            executor, thread = self._service_spin
            executor.shutdown(timeout_sec=SERVICE_THREAD_JOIN_S)
            thread.join(SERVICE_THREAD_JOIN_S)
            self._service_node.destroy_node()
        if self.client_node is not self.node:
            self.client_node.destroy_node()
        self.node.destroy_node()
