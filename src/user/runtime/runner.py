"""Run one node in this process until SIGINT/SIGTERM, then shut it down within a deadline.

Signals: the first SIGINT or SIGTERM starts the shutdown, and from that moment on the process has its deadline
(`$USER_SHUTDOWN_DEADLINE_S`, the launcher's allowance minus a margin), even while the node is still being
imported or built: past it, the process exits anyway (code 3). A signal that comes while the node is starting
stops it before it is built. A further SIGINT is ignored (the terminal and ros2 launch may both send one); a
SIGTERM after the first signal is the launcher giving up on the node, and the process exits at once (code 3).

What the process tells its launcher (exit code, status line) is in `user.runtime.status`.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from user.bus.base import Bus, BusError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.config.strict import ConfigError
from user.runtime.diagnostics import DiagnosticsPublisher, period_from_env
from user.runtime.kinds import UnknownNodeKindError, load_kind
from user.runtime.node import Node, started
from user.runtime.status import (
    COMPLETE,
    CONFIG_ERROR,
    EXIT_CONFIG_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_RUN_COMPLETE,
    EXIT_SHUTDOWN_TIMEOUT,
    EXIT_UNAVAILABLE,
    FAILED,
    RUNNING,
    STARTING,
    STOPPED,
    write_status,
)

SHUTDOWN_DEADLINE_S = 4.5  # past this the process exits anyway (launchers allow 5 s)
ENV_SHUTDOWN_DEADLINE = "USER_SHUTDOWN_DEADLINE_S"  # set by both launchers from the node's shutdown_timeout_s
WATCH_POLL_S = 1.0  # the shutdown watchdog's longest wait for a signal
WAIT_POLL_S = 0.5  # how often the main thread looks for a signal

EXIT_STARTUP_FAILED = EXIT_CONFIG_ERROR  # `user node` with a bad command line: a configuration error

# what a failure while starting tells the launcher: (status state, exit code)
_CONFIG = (CONFIG_ERROR, EXIT_CONFIG_ERROR)  # restarting cannot help
_UNAVAILABLE = (FAILED, EXIT_UNAVAILABLE)  # may work on a restart
_FAILED = (FAILED, EXIT_FAILED)

_log = logging.getLogger("user.runner")


def _noticed(_signum: int, _frame: Any) -> None:
    """The Python-level handler of SIGINT/SIGTERM: nothing to do, `StopSignal`'s watchdog acts on the signal."""


def shutdown_deadline_s() -> float:
    """How long the shutdown may take: the launcher's allowance minus a margin, or the default."""
    try:
        return float(os.environ.get(ENV_SHUTDOWN_DEADLINE, SHUTDOWN_DEADLINE_S))
    except ValueError:
        return SHUTDOWN_DEADLINE_S


class StopSignal:
    """`event` is set by the first SIGINT or SIGTERM; the watchdog then ends the process when the shutdown takes
    longer than `deadline_s`, and at once on a SIGTERM after that first signal. Install on the main thread.

    The watchdog thread reads the signals from Python's wakeup fd (`signal.set_wakeup_fd`) and acts on them itself:
    a Python-level handler runs only when the main thread is back in Python code, and a signal delivered to another
    thread does not interrupt a main thread blocked in a long call (a constructor or a `destroy` that hangs), which
    would then never see the SIGTERM meant to end it."""

    def __init__(self, name: str = "node", deadline_s: float | None = None) -> None:
        self.name = name
        self.deadline_s = shutdown_deadline_s() if deadline_s is None else deadline_s
        self.event = threading.Event()
        self.finished = threading.Event()
        self.signum: int | None = None
        self._signals, wakeup = os.pipe()
        os.set_blocking(wakeup, False)
        signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _noticed)  # Python's own C handler writes the signal to the wakeup fd
        threading.Thread(target=self._watch, name="shutdown-watchdog", daemon=True).start()

    def _watch(self) -> None:
        stop_by: float | None = None  # the shutdown's deadline, from the first signal
        while not self.finished.is_set():
            timeout = WATCH_POLL_S if stop_by is None else max(0.0, min(WATCH_POLL_S, stop_by - time.monotonic()))
            readable, _, _ = select.select([self._signals], [], [], timeout)
            for signum in os.read(self._signals, 64) if readable else b"":
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    continue
                if stop_by is None:
                    self.signum = signum
                    stop_by = time.monotonic() + self.deadline_s
                    self.event.set()
                elif signum == signal.SIGTERM and not self.finished.is_set():  # the launcher's allowance is over
                    _log.error("node %s got SIGTERM while shutting down; exiting now", self.name)
                    os._exit(EXIT_SHUTDOWN_TIMEOUT)
            if stop_by is not None and time.monotonic() >= stop_by and not self.finished.is_set():
                _log.error("node %s did not shut down within %.1f s; exiting anyway", self.name, self.deadline_s)
                os._exit(EXIT_SHUTDOWN_TIMEOUT)

    def wait(self) -> None:
        while not self.event.wait(WAIT_POLL_S):
            pass

    def done(self) -> None:
        """The shutdown is complete: the watchdog stands down."""
        self.finished.set()


def refuse_start(
    name: str, failure: tuple[str, int], reason: str, stop: StopSignal, close: Callable[[], None] | None = None
) -> int:
    """Log why node `name` cannot start (one line), write it as its status, release what was opened; the exit code."""
    state, code = failure
    _log.error("node %s: %s", name, reason)
    write_status(state, reason)
    try:
        if close is not None:
            close()
    finally:
        stop.done()
    return code


def _stopped_while_starting(name: str, stop: StopSignal, close: Callable[[], None] | None = None) -> int:
    _log.info("node %s stopped while starting (signal %s)", name, stop.signum)
    try:
        if close is not None:
            close()
    finally:
        stop.done()
    write_status(STOPPED)
    return EXIT_OK


def _diagnostics(node: Node) -> DiagnosticsPublisher | None:
    """The node's `/diagnostics` publisher (None when `USER_DIAGNOSTICS_PERIOD_S` is 0, or unusable: logged)."""
    try:
        period = period_from_env()
    except ValueError as exc:
        _log.error("no /diagnostics from node %s: %s", node.name, exc)
        return None
    if period <= 0:
        return None
    try:
        return DiagnosticsPublisher(node, period, node.now_ns)
    except Exception as exc:  # the node runs on without them
        _log.error("no /diagnostics from node %s: %s: %s", node.name, type(exc).__name__, exc)
        return None


def _make(kind: str, bus: Bus, stop: StopSignal) -> Node:
    """Node `kind` made on `bus`, configured and activated (`user.runtime.node.started`); one whose configure or
    activate step failed is destroyed again before the error goes on."""
    node: Node = load_kind(kind)(bus)
    node.request_stop = stop.event.set  # before activate: a control thread may fail at once
    try:
        started(node)
    except BaseException:
        try:
            node.destroy()
        except Exception:  # the start's own error is the one to report
            _log.exception("node %s: destroy after a failed start", bus.name)
        raise
    return node


def serve(name: str, kind: str, bus: Bus, close: Callable[[], None], stop: StopSignal) -> int:
    """Make node `kind` on `bus`, run it until `stop`, then destroy it within the shutdown deadline.

    Both runtimes end here: the bus stays open while the node is destroyed (a final checkpoint or message
    still goes out), and `close` (bus, executor, session) runs last."""
    if stop.event.is_set():
        return _stopped_while_starting(name, stop, close)
    try:
        node = _make(kind, bus, stop)
    except (ConfigError, ImportError) as exc:  # a bad setting, a missing dependency: the same start fails again
        return refuse_start(name, _CONFIG, str(exc), stop, close)
    except BusError as exc:
        return refuse_start(name, _UNAVAILABLE, str(exc), stop, close)
    except Exception as exc:
        _log.exception("node %s failed while starting", name)
        return refuse_start(name, _FAILED, f"{type(exc).__name__}: {exc}", stop, close)
    diagnostics = _diagnostics(node)
    if isinstance(bus, ZenohBus) and bus.parameter_store is not None:  # rclpy serves a node's parameters itself
        from user.runtime.zenoh_params import serve_parameters

        serve_parameters(bus, bus.parameter_store)  # `user param`; closed with the bus
    write_status(RUNNING)
    _log.info("node %s (%s) running", name, kind)
    stop.wait()
    why = (
        "it failed"
        if node.failure is not None
        else "the run is complete"
        if node.completed
        else f"signal {stop.signum}"
    )
    _log.info("node %s shutting down (%s)", name, why)
    try:
        if diagnostics is not None:
            diagnostics.close()
        node.destroy()
    finally:
        try:
            close()
        finally:
            stop.done()
    if node.failure is not None:
        write_status(FAILED, node.failure)
        return EXIT_FAILED
    if node.completed is not None:
        write_status(COMPLETE, node.completed)
        return EXIT_RUN_COMPLETE
    write_status(STOPPED)  # after the shutdown: a node killed on its way out is recorded by its launcher
    return EXIT_OK


def run_node(kind: str, name: str, parameters: Mapping[str, Any], settings: ZenohSettings) -> int:
    """Start node `kind` as `name` on the Zenoh runtime; returns the process exit code."""
    stop = StopSignal(name)
    write_status(STARTING)
    try:
        load_kind(kind)
    except (UnknownNodeKindError, ImportError) as exc:
        return refuse_start(name, _CONFIG, str(exc), stop)
    if stop.event.is_set():
        return _stopped_while_starting(name, stop)
    try:
        bus = ZenohBus(name, settings, parameters)
    except BusError as exc:
        return refuse_start(name, _UNAVAILABLE, str(exc), stop)
    return serve(name, kind, bus, bus.close, stop)
