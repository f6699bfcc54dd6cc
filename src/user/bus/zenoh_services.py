"""Services on Zenoh: a server is a queryable whose handler turns the query's CDR request into a CDR reply, a call
is a `get` with a deadline. An error travels back as an error reply holding its text, as it does over
zenoh-bridge-ros2dds.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import zenoh

from user.bus.base import ServiceError, ServiceHandler, ServiceTimeoutError

ZENOH_TIMEOUT_REPLY = "Timeout"  # the error reply zenoh synthesises when a query's deadline passes

_log = logging.getLogger(__name__)


def answer(
    node: str, service: str, handler: ServiceHandler, query: Any, guard: contextlib.AbstractContextManager[Any]
) -> None:
    """Run `handler` on the query's request (inside `guard`) and reply, outside it. The query is dropped at
    once: the caller's answer is complete only then (a query kept alive would run into its deadline)."""
    request = query.payload.to_bytes() if query.payload is not None else b""
    try:
        with guard:
            response = handler(request)
    except Exception as exc:
        _log.exception("node %s: service %s handler raised", node, service)
        query.reply_err(f"service {service} failed: {exc}".encode())
        query.drop()
        return
    query.reply(query.key_expr, response)
    query.drop()


def call(session: Any, key: str, request: bytes, timeout_s: float, *, service: str, srv_type: str) -> bytes:
    """Send `request` to the server of `service` (at `key`) and return the response bytes; never waits longer
    than `timeout_s`. `ServiceTimeoutError` at the deadline, `ServiceError` without a server or on its error."""
    start = time.monotonic()
    replies = session.get(
        key,
        payload=request,
        timeout=timeout_s,
        target=zenoh.QueryTarget.BEST_MATCHING,
        congestion_control=zenoh.CongestionControl.BLOCK,
    )
    timed_out = ServiceTimeoutError(f"service {service} ({srv_type}) did not answer within {timeout_s:.1f} s")
    for reply in replies:
        if reply.ok is not None:
            return bytes(reply.ok.payload.to_bytes())
        text = reply.err.payload.to_bytes().decode(errors="replace")
        if text == ZENOH_TIMEOUT_REPLY:
            raise timed_out
        raise ServiceError(text)
    if time.monotonic() - start >= 0.9 * timeout_s:
        raise timed_out
    raise ServiceError(f"no server for service {service} ({srv_type})")
