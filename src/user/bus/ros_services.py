"""`RosServices`: how a `RosBus` serves and calls services on rclpy, moving CDR bytes like every other path.

A server's handler runs on the bus's node, in its (mutually exclusive) callback group, like any callback; an
`OwnThread` handler runs on a hidden node (`_<name>_services`, made on first use) spun by an executor thread of
its own, so it may wait while the node's callbacks go on. A handler that raises is logged and the caller gets an
empty response (ROS services have no error reply). Each service has one long-lived client, on the clients'
node, and every call has a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from user.bus.base import OwnThread, ServiceError, ServiceHandler, ServiceTimeoutError
from user.bus.ros_types import RosHandle, require_rclpy, spin

SERVICE_POLL_S = 0.02  # how often a call waits between checks for a server
SERVICE_THREAD_JOIN_S = 2.0  # how long closing the bus waits for a running `OwnThread` handler

_log = logging.getLogger(__name__)


def service_class(srv_type: str) -> Any:
    from rosidl_runtime_py.utilities import get_service

    return get_service(srv_type)


class RosServices:
    """The servers and clients of one bus: servers on `node` (in `group`), clients on `client_node` (in
    `clients_group`), `OwnThread` servers on the hidden node."""

    def __init__(self, node: Any, group: Any, client_node: Any, clients_group: Any) -> None:
        self.node = node
        self.client_node = client_node
        self._group = group
        self._clients_group = clients_group
        self._name = str(node.get_name())
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()  # guards the clients and the hidden node's making
        self._service_node: Any = None  # `OwnThread` services: a hidden node, spun by `_service_spin`
        self._service_spin: tuple[Any, threading.Thread] | None = None

    def create(self, name: str, srv_type: str, handler: ServiceHandler) -> RosHandle:
        """Serve `srv_type` under `name` with `handler` (on the hidden node when it is an `OwnThread`)."""
        from rclpy.serialization import deserialize_message, serialize_message

        cls = service_class(srv_type)
        node_name = self._name

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
            return RosHandle(lambda: node.destroy_service(srv))
        srv = self.node.create_service(cls, name, on_request, callback_group=self._group)
        return RosHandle(lambda: self.node.destroy_service(srv))

    def _own_thread_node(self) -> Any:
        """The hidden node of `OwnThread` services, spun on a thread of its own (made on first use)."""
        with self._lock:
            if self._service_node is None:
                rclpy, ctx = require_rclpy(), self.node.context
                self._service_node = rclpy.node.Node(
                    f"_{self._name}_services",
                    context=ctx,
                    namespace=self.node.get_namespace(),
                    use_global_arguments=False,
                    start_parameter_services=False,
                    enable_rosout=False,
                )
                executor = rclpy.executors.SingleThreadedExecutor(context=ctx)
                executor.add_node(self._service_node)
                thread = threading.Thread(target=spin, args=(executor,), name=f"{self._name}-services", daemon=True)
                thread.start()
                self._service_spin = (executor, thread)
            return self._service_node

    def _client(self, name: str, srv_type: str) -> tuple[Any, Any]:
        """The long-lived client of a service (made on first use), named as the main node resolves it."""
        cls = service_class(srv_type)
        name = self.node.resolve_service_name(name)
        with self._lock:
            client = self._clients.get((name, srv_type))
            if client is None:
                client = self.client_node.create_client(cls, name, callback_group=self._clients_group)
                self._clients[(name, srv_type)] = client
        return client, cls

    def call(self, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
        """Send a request and return the response bytes; never waits longer than `timeout_s`."""
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

    def close(self) -> None:
        """Destroy the clients and stop the hidden node (the bus destroys its own nodes)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            self.client_node.destroy_client(client)
        if self._service_spin is not None:
            executor, thread = self._service_spin
            executor.shutdown(timeout_sec=SERVICE_THREAD_JOIN_S)
            thread.join(SERVICE_THREAD_JOIN_S)
            self._service_node.destroy_node()
