"""`ZenohBus`: the Bus on Zenoh, speaking exactly what zenoh-bridge-ros2dds speaks.

Key = ROS topic without its leading '/', payload = CDR bytes with the 4-byte encapsulation header.
Reliable topics use congestion control BLOCK (nothing silently dropped), latched topics use zenoh-ext's
advanced publisher cache, services are queryables (`user.bus.zenoh_services`), presence is liveliness tokens, and
every endpoint announces itself with a graph token (`user.bus.zenoh_graph`). A query is answered on Zenoh's thread
under the callback lock, or, for an `OwnThread` handler, handed to the bus's service thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import zenoh
import zenoh.ext as zext

from user.bus.base import (
    RELIABLE,
    BusClosedError,
    OwnThread,
    QoS,
    RawCallback,
    RouterUnreachableError,
    ServiceHandler,
    TokenCallback,
    describe,
)
from user.bus.liveliness import alive_keys
from user.bus.names import in_domain, mangle, out_of_domain, resolve, topic_to_key
from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.service_thread import ServiceThread
from user.bus.timers import TimerScheduler
from user.bus.zenoh_config import ENV_ROUTER, ZenohSettings, session_config
from user.bus.zenoh_graph import (
    GRAPH_PREFIX,
    NODE_PREFIX,
    Endpoint,
    TopicEnds,
    graph_token_key,
    node_name,
    node_token_key,
    parse_token,
    topic_ends,
    topic_types,
)
from user.bus.zenoh_handles import Declared, ZenohPublisher
from user.bus.zenoh_services import answer, call
from user.config.strict import from_mapping

P = TypeVar("P")

_log = logging.getLogger(__name__)


class ZenohBus:
    """A node's connection to the Zenoh network."""

    def __init__(
        self,
        name: str,
        settings: ZenohSettings | None = None,
        parameters: Mapping[str, Any] | None = None,
        namespace: str = "/",
    ) -> None:
        self._name = name
        self.namespace = namespace
        self.settings = settings or ZenohSettings.from_env()
        self._parameters = dict(parameters or {})
        self._store: ParameterStore[Any] | None = None
        self._lock = threading.RLock()  # held while any callback of this bus runs
        self._handles: list[Declared] = []
        self._ids = itertools.count()
        self._closed = False
        self.session = zenoh.open(session_config(self.settings))
        try:
            self._wait_for_router()
        except RouterUnreachableError:
            self.session.close()  # type: ignore[no-untyped-call]
            raise
        self.zid = str(self.session.zid())
        self._timers = TimerScheduler(name, self._lock)
        self._service_thread: ServiceThread | None = None  # started by the first `OwnThread` service
        node_key = self._key(node_token_key(name, self.zid))
        self._node_token = self.session.liveliness().declare_token(node_key)

    @property
    def name(self) -> str:
        return self._name

    def _key(self, key: str) -> str:
        """`key` inside this session's domain: the one place a domain is applied."""
        return in_domain(self.settings.domain, key)

    def _topic_key(self, full: str) -> str:
        return self._key(topic_to_key(full))

    def _wait_for_router(self) -> None:
        if not self.settings.router:
            return  # peer-to-peer only (e.g. multicast scouting): nothing to wait for
        deadline = time.monotonic() + self.settings.router_timeout_s
        while not list(self.session.info.routers_zid()):
            if time.monotonic() >= deadline:
                raise RouterUnreachableError(
                    f"node {self._name!r}: no Zenoh router reachable at {', '.join(self.settings.router)} "
                    f"within {self.settings.router_timeout_s:.1f} s. Start one with `user router` "
                    f"(`user bringup` starts one itself) or point {ENV_ROUTER} at a running router."
                )
            time.sleep(0.02)

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosedError(f"bus of node {self._name!r} is closed")

    def _keep(self, handle: Declared) -> None:
        with self._lock:
            self._handles.append(handle)

    def _forget(self, handle: Declared) -> None:
        with self._lock:
            if handle in self._handles:
                self._handles.remove(handle)

    def _graph_token(self, role: str, topic: str, typename: str, qos: QoS | None = None) -> Any:
        entity = f"{mangle(self._name)}/{self.zid}_{next(self._ids)}"
        return self.session.liveliness().declare_token(self._key(graph_token_key(role, topic, typename, entity, qos)))

    def _guarded(self, callback: Callable[..., None], what: str) -> Callable[..., None]:
        lock = self._lock

        def run(*args: Any) -> None:
            with lock:
                try:
                    callback(*args)
                except Exception:
                    _log.exception("node %s: callback %s for %s raised", self._name, describe(callback), what)

        return run

    def create_publisher(self, topic: str, typename: str, qos: QoS = RELIABLE) -> ZenohPublisher:
        self._check_open()
        full = resolve(topic, self.namespace)
        key = self._topic_key(full)
        options: dict[str, Any] = {
            "congestion_control": zenoh.CongestionControl.BLOCK if qos.reliable else zenoh.CongestionControl.DROP,
            "reliability": zenoh.Reliability.RELIABLE if qos.reliable else zenoh.Reliability.BEST_EFFORT,
            "express": qos.express,
        }
        if qos.latched:
            publisher: Any = zext.declare_advanced_publisher(
                self.session,
                key,
                cache=zext.CacheConfig(max_samples=qos.depth),
                publisher_detection=True,
                **options,
            )
        else:
            publisher = self.session.declare_publisher(key, **options)
        handle = ZenohPublisher(self._forget, full, publisher, self._graph_token("pub", full, typename, qos))
        self._keep(handle)
        return handle

    def create_subscription(self, topic: str, typename: str, callback: RawCallback, qos: QoS = RELIABLE) -> Declared:
        self._check_open()
        full = resolve(topic, self.namespace)
        key = self._topic_key(full)
        # The per-message path is one flat function: at 100 B messages every extra Python frame and
        # `with` statement costs measurable throughput (bench/bus.py).
        acquire, release, name = self._lock.acquire, self._lock.release, self._name

        def on_sample(sample: Any) -> None:
            payload = sample.payload.to_bytes()
            acquire()
            try:
                callback(payload)
            except Exception:
                _log.exception("node %s: callback %s for topic %s raised", name, describe(callback), full)
            finally:
                release()

        if qos.latched:
            history = zext.HistoryConfig(detect_late_publishers=True, max_samples=qos.depth)
            sub: Any = zext.declare_advanced_subscriber(self.session, key, on_sample, history=history)
        else:
            sub = self.session.declare_subscriber(key, on_sample)
        handle = Declared(self._forget, sub, self._graph_token("sub", full, typename, qos))
        self._keep(handle)
        return handle

    def create_timer(self, period_s: float, callback: Callable[[], None]) -> Any:
        self._check_open()
        return self._timers.add(period_s, callback)

    def create_service(self, name: str, srv_type: str, handler: ServiceHandler) -> Declared:
        self._check_open()
        full = resolve(name, self.namespace)
        if isinstance(handler, OwnThread):
            with self._lock:
                if self._service_thread is None:
                    self._service_thread = ServiceThread(self._name)
                worker = self._service_thread

            def on_query(query: Any) -> None:  # Zenoh's thread: hand over, never wait here
                worker.submit(lambda: answer(self._name, full, handler, query, contextlib.nullcontext()))

        else:

            def on_query(query: Any) -> None:
                answer(self._name, full, handler, query, self._lock)

        queryable = self.session.declare_queryable(self._topic_key(full), on_query, complete=True)
        handle = Declared(self._forget, queryable, self._graph_token("srv", full, srv_type))
        self._keep(handle)
        return handle

    def call_service(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        """Send a request and return the response bytes; never waits longer than `timeout_s`."""
        self._check_open()
        full = resolve(name, self.namespace)
        return call(self.session, self._topic_key(full), request, timeout_s, service=full, srv_type=srv_type)

    def declare_parameters(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        where = f"parameters of node {self._name!r}"
        values = from_mapping(spec, self._parameters, where=where)
        self._store = ParameterStore(spec, values, on_change, where)
        return values

    @property
    def parameter_store(self) -> ParameterStore[Any] | None:
        """The node's settings once declared (the runner serves them: `user.runtime.zenoh_params`)."""
        return self._store

    def set_parameters(self, changes: Mapping[str, Any]) -> None:
        if self._store is None:
            raise ParameterRefusedError(f"node {self._name!r} has declared no parameters")
        with self._lock:
            self._store.apply(changes)

    def declare_token(self, key: str) -> Declared:
        self._check_open()
        handle = Declared(self._forget, self.session.liveliness().declare_token(self._key(key)))
        self._keep(handle)
        return handle

    def watch_tokens(self, prefix: str, callback: TokenCallback) -> Declared:
        self._check_open()
        guarded = self._guarded(callback, f"tokens {prefix}")
        domain = self.settings.domain

        def on_sample(sample: Any) -> None:
            guarded(out_of_domain(domain, str(sample.key_expr)), sample.kind == zenoh.SampleKind.PUT)

        pattern = self._key(f"{prefix.rstrip('/')}/**")
        sub = self.session.liveliness().declare_subscriber(pattern, on_sample, history=True)
        handle = Declared(self._forget, sub)
        self._keep(handle)
        return handle

    def _live_tokens(self, pattern: str, window_s: float) -> list[str]:
        """Liveliness tokens matching `pattern` in this session's domain, collected for `window_s`."""
        alive = alive_keys(self.session, self._key(pattern), window_s)
        return sorted(out_of_domain(self.settings.domain, key) for key in alive)

    def count_subscribers(self, topic: str, timeout_s: float = 0.5) -> int:
        full = mangle(resolve(topic, self.namespace))
        return len(self._live_tokens(f"{GRAPH_PREFIX}/sub/{full}/**", timeout_s))

    def topic_names_and_types(self, timeout_s: float = 0.5) -> dict[str, list[str]]:
        return topic_types(self.graph_endpoints(timeout_s))

    def graph_endpoints(self, timeout_s: float = 0.5) -> list[Endpoint]:
        """Every publisher, subscription and service announced on the network (`user.bus.zenoh_graph`)."""
        return [e for e in map(parse_token, self._live_tokens(f"{GRAPH_PREFIX}/*/**", timeout_s)) if e is not None]

    def topic_endpoints(self, timeout_s: float = 0.5) -> dict[str, TopicEnds]:
        """Topic -> (type, publishing node names, subscribing node names), from the graph tokens."""
        return topic_ends(self.graph_endpoints(timeout_s))

    def node_names(self, timeout_s: float = 0.5) -> list[str]:
        """Names of the nodes currently alive on the network."""
        return sorted({node_name(key) for key in self._live_tokens(f"{NODE_PREFIX}/**", timeout_s)})

    def close(self) -> None:
        """Undeclare everything and close the session. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._timers.stop()
        with self._lock:
            handles = list(reversed(self._handles))
        for handle in handles:
            handle.close()
        if self._service_thread is not None:
            self._service_thread.stop()
        with contextlib.suppress(zenoh.ZError):
            self._node_token.undeclare()  # type: ignore[no-untyped-call]
        self.session.close()  # type: ignore[no-untyped-call]
