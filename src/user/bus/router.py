"""The Zenoh router: a Python session in router mode (no zenohd binary needed), and a reachability probe."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import zenoh

from user.bus.zenoh_config import ZenohSettings, session_config

_log = logging.getLogger(__name__)


def open_router(listen: list[str], settings: ZenohSettings | None = None, connect: list[str] | None = None) -> Any:
    """Open a router session listening on `listen` and dialling the routers at `connect` (other sites); close it
    to stop routing. TLS and access control come from `settings.config_file`."""
    cfg = session_config(settings or ZenohSettings(), mode="router", listen=listen, connect=connect)
    try:
        return zenoh.open(cfg)
    except zenoh.ZError as exc:
        raise OSError(f"cannot start a Zenoh router on {', '.join(listen)}: {exc}") from exc


def router_reachable(endpoints: list[str], timeout_s: float = 2.0, config_file: str | None = None) -> bool:
    """True when a Zenoh router answers at one of `endpoints` within `timeout_s` (`config_file`: the probe's
    TLS identity, for a router that only accepts authenticated peers)."""
    probe = ZenohSettings(router=list(endpoints), listen=[], router_timeout_s=timeout_s, config_file=config_file)
    try:
        session = zenoh.open(session_config(probe, mode="client"))
    except zenoh.ZError:
        return False  # a client session refuses to open when no router answers
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if list(session.info.routers_zid()):
                return True
            time.sleep(0.02)
        return False
    finally:
        session.close()  # type: ignore[no-untyped-call]


def serve(
    listen: list[str], stop: threading.Event, settings: ZenohSettings | None = None, connect: list[str] | None = None
) -> None:
    """Route until `stop` is set."""
    session = open_router(listen, settings, connect)
    dialling = f", dialling {', '.join(connect)}" if connect else ""
    _log.info("Zenoh router %s listening on %s%s", session.zid(), ", ".join(listen), dialling)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        session.close()
        _log.info("Zenoh router stopped")
