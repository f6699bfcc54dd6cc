"""`RosBus`: the Bus on rclpy, moving the same CDR bytes as `ZenohBus`. The only module importing rclpy.

rclpy is imported when a `RosBus` is made, never at module import, so the rest of the package works
without ROS. Publishing and subscribing use serialized messages (`publish(bytes)`, `raw=True`), so the
codec that runs everywhere else is also the one that runs here. Code here uses only rclpy names that
exist on Humble (checked by test/bus/test_ros_humble_api.py against `rclpy-humble-api.txt`).

Semantics kept from the Bus contract:
- callbacks of one bus never run concurrently: subscriptions, timers, services, presence polls and
  parameter changes all sit in the node's default (mutually exclusive) callback group, spun by a
  single-threaded executor (rclpy's multi-threaded one costs about 4 ms per message here); service clients
  live on a second, hidden node with its own executor thread, so a callback may wait on a service call;
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
    QoS,
    RawCallback,
    ServiceError,
    ServiceHandler,
    ServiceTimeoutError,
    TokenCallback,
    describe,
)
from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.ros_params import ParamKind, RosParam, check_finite_bounds, decode, ros_params
from user.config.strict import ConfigError, from_mapping

P = TypeVar("P")

TOKEN_TOPIC_PREFIX = "/_user/alive/k"  # presence tokens become publishers on these (hidden) topics
TOKEN_POLL_S = 0.5  # how often the ROS graph is polled for token changes
# Declared by rclpy itself on every node (Humble: use_sim_time; Jazzy adds the type description service).
ROS_BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})
SERVICE_POLL_S = 0.02  # how often a call waits between checks for a server

_log = logging.getLogger(__name__)


class RosUnavailableError(ImportError):
    """rclpy cannot be imported: ROS 2 is not installed or not sourced."""


def require_rclpy() -> Any:
    """Import rclpy, or explain how to get it (or how to do without it)."""
    try:
        import rclpy
        import rclpy.callback_groups
        import rclpy.executors
        import rclpy.node
        import rclpy.parameter
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
        self.publish = publisher.publish  # rclpy publishes bytes as an already serialized message

    def wait_for_subscribers(self, timeout_s: float) -> bool:
        """Wait until at least one subscription matches; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        while self._publisher.get_subscription_count() == 0:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True


def ros_qos(qos: QoS) -> Any:
    """The rclpy QoS profile of a Bus QoS.

    A reliable, not latched topic keeps all history (KEEP_ALL), so a burst is delivered whole, as Zenoh's
    congestion control BLOCK does, instead of only its last `depth` messages; latched and best-effort
    topics keep the last `depth`. (History does not take part in QoS matching, so these subscriptions
    still match publishers of other packages, e.g. realsense2_camera's sensor-data images.)"""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    keep_all = qos.reliable and not qos.latched
    return QoSProfile(
        history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.latched else DurabilityPolicy.VOLATILE,
    )


def _ros_type(kind: ParamKind) -> Any:
    from rclpy.parameter import Parameter

    return Parameter.Type.STRING if kind is ParamKind.YAML else Parameter.Type[kind.name]


def parameter_descriptor(param: RosParam) -> Any:
    """The rcl_interfaces ParameterDescriptor `ros2 param describe` shows for a setting."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    descriptor = ParameterDescriptor(
        name=param.name,
        type=_ros_type(param.kind).value,
        description=param.description,
        additional_constraints=param.constraints,
        read_only=param.read_only,
        dynamic_typing=False,
    )
    if param.minimum is not None or param.maximum is not None:
        lo, hi = check_finite_bounds(param)
        if param.kind is ParamKind.INTEGER:
            descriptor.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
    return descriptor


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

        srv = self.node.create_service(cls, name, on_request, callback_group=self._group)
        return _RosHandle(lambda: self.node.destroy_service(srv))

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
                self.node.declare_parameter(param.name, _ros_type(param.kind), descriptor, ignore_override=True)
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
        params = [Parameter(name, _ros_type(table[name].kind), value) for name, value in changes.items()]
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
        if self.client_node is not self.node:
            self.client_node.destroy_node()
        self.node.destroy_node()


class RosRuntime:
    """A node on its own rclpy context, spun on background threads: a Bus on ROS inside any process.

    What a process of the ROS runtime runs (`user.node.ros_runner`, with `args` from the command line:
    remappings, `--params-file`, `-p`), reusable by tools and tests; each runtime is its own DDS
    participant, like a separate process. `parameters` are overrides as a launch file would give them.
    The node's callbacks run on one executor thread, its service clients on a hidden node (`_<name>_calls`)
    on another."""

    def __init__(
        self,
        name: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        args: list[str] | None = None,
        namespace: str | None = None,
        domain_id: int | None = None,
    ) -> None:
        rclpy = require_rclpy()
        from rclpy.parameter import Parameter

        self.context = rclpy.context.Context()
        rclpy.init(args=args, context=self.context, domain_id=domain_id)  # no signal handlers: not the default
        overrides = [Parameter(k, value=v) for k, v in (parameters or {}).items()]
        self.node = rclpy.node.Node(
            name,
            context=self.context,
            namespace=namespace,
            parameter_overrides=overrides,
            automatically_declare_parameters_from_overrides=True,
        )
        self.client_node = rclpy.node.Node(
            f"_{self.node.get_name()}_calls",
            context=self.context,
            namespace=self.node.get_namespace(),
            use_global_arguments=False,  # the command line's remappings and parameters are the main node's
            start_parameter_services=False,
            enable_rosout=False,
        )
        self.bus = RosBus(self.node, self.client_node)
        self._executors = []
        self._threads = []
        for node in (self.node, self.client_node):
            executor = rclpy.executors.SingleThreadedExecutor(context=self.context)
            executor.add_node(node)
            thread = threading.Thread(target=self._spin, args=(executor,), name=f"{name}-ros-spin", daemon=True)
            self._executors.append(executor)
            self._threads.append(thread)
            thread.start()

    @staticmethod
    def _spin(executor: Any) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):  # the context was shut down under us
            executor.spin()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop spinning (a running callback finishes first), then destroy the nodes and the context."""
        for executor in self._executors:
            executor.shutdown(timeout_sec=timeout_s)
        for thread in self._threads:
            thread.join(timeout_s)
        self.bus.close()
        self.context.try_shutdown()
