"""Run one node in this process until SIGINT/SIGTERM, then shut it down within a deadline."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from user.bus.base import Bus, BusError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import ConfigError
from user.runtime.kinds import UnknownNodeKindError, load_kind

SHUTDOWN_DEADLINE_S = 4.5  # past this the process exits anyway (launchers allow 5 s)
ENV_SHUTDOWN_DEADLINE = "USER_SHUTDOWN_DEADLINE_S"  # set by `user bringup` from the node's shutdown_timeout_s


def shutdown_deadline_s() -> float:
    """How long `destroy` may take: the launcher's allowance minus a margin, or the default."""
    try:
        return float(os.environ.get(ENV_SHUTDOWN_DEADLINE, SHUTDOWN_DEADLINE_S))
    except ValueError:
        return SHUTDOWN_DEADLINE_S


EXIT_OK = 0
EXIT_STARTUP_FAILED = 2
EXIT_SHUTDOWN_TIMEOUT = 3

_log = logging.getLogger("user.runner")


class StopSignal:
    """An event set by SIGINT or SIGTERM (installed on the main thread)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signum = signum
        self.event.set()

    def wait(self) -> None:
        while not self.event.wait(0.5):
            pass


def _force_exit_after(deadline_s: float, name: str) -> threading.Timer:
    def give_up() -> None:
        _log.error("node %s did not shut down within %.1f s; exiting anyway", name, deadline_s)
        os._exit(EXIT_SHUTDOWN_TIMEOUT)

    timer = threading.Timer(deadline_s, give_up)
    timer.daemon = True
    timer.start()
    return timer


def serve(name: str, kind: str, bus: Bus, close: Callable[[], None], stop: StopSignal) -> int:
    """Make node `kind` on `bus`, run it until `stop`, then destroy it within the shutdown deadline.

    Both runtimes end here: the bus stays open while the node is destroyed (a final checkpoint or message
    still goes out), and `close` (bus, executor, session) runs last."""
    try:
        node = load_kind(kind)(bus)
    except ConfigError as exc:
        _log.error("node %s: %s", name, exc)
        close()
        return EXIT_STARTUP_FAILED
    _log.info("node %s (%s) running", name, kind)
    stop.wait()
    watchdog = _force_exit_after(shutdown_deadline_s(), name)
    _log.info("node %s shutting down (signal %s)", name, stop.signum)
    try:
        node.destroy()
    finally:
        close()
        watchdog.cancel()
    return EXIT_OK


def run_node(kind: str, name: str, parameters: Mapping[str, Any], settings: ZenohSettings) -> int:
    """Start node `kind` as `name` on the Zenoh runtime; returns the process exit code."""
    stop = StopSignal()
    try:
        load_kind(kind)
        bus = ZenohBus(name, settings, parameters)
    except (UnknownNodeKindError, BusError) as exc:
        _log.error("%s", exc)
        return EXIT_STARTUP_FAILED
    return serve(name, kind, bus, bus.close, stop)
