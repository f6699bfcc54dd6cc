"""One supervised process (`user.deploy.child`): SIGINT, SIGTERM, SIGKILL on the deadlines of a clock the test
drives, and why a process exited, from its status line or, failing that, the last line it wrote; once it is gone,
its status line says how it ended even when it could not write that itself."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from test.conftest import wait_until
from user.deploy.child import Child, last_line
from user.runtime.status import NodeStatus, read_status, write_status

STUBBORN = (  # a process that ignores SIGINT and SIGTERM: only SIGKILL ends it
    "import signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


def _child(tmp_path: Path, code: str, timeout_s: float = 5.0) -> Child:
    return Child(
        "probe",
        [sys.executable, "-c", code],
        {},
        tmp_path / "probe.log",
        status_path=tmp_path / "probe.status",
        shutdown_timeout_s=timeout_s,
    )


def test_escalation_follows_each_signals_deadline(tmp_path: Path) -> None:
    child = _child(tmp_path, STUBBORN, timeout_s=5.0)
    child.start()
    try:
        assert wait_until(lambda: "ready" in child.log_path.read_text(), 60.0)
        child.interrupt(100.0)
        assert child.stopping
        child.interrupt(101.0)  # asked already: no second SIGINT, no new deadline
        assert child.escalate(104.9) and [s for s, _, _ in child._signals] == [signal.SIGINT]
        assert child.escalate(105.0)
        assert [s for s, _, _ in child._signals] == [signal.SIGINT, signal.SIGTERM]
        assert child.escalate(105.9) and child.alive()  # SIGTERM ignored, its second not over yet
        assert child.escalate(106.0)
        assert child.proc is not None and child.proc.wait(30) == -signal.SIGKILL
        assert child.finish() == -signal.SIGKILL and not child.stopping
    finally:
        if child.proc is not None and child.proc.poll() is None:
            child.proc.kill()


def test_after_sigkill_is_over_escalate_says_there_is_nothing_left(tmp_path: Path) -> None:
    child = _child(tmp_path, STUBBORN, timeout_s=1.0)
    child.proc = None
    assert child.escalate(0.0)  # nothing to stop
    child._signals = [(signal.SIGKILL, 0.0, 1.0)]
    child.start()  # a fresh start forgets the signals of the last one
    try:
        assert not child.stopping
        child._signals = [(signal.SIGKILL, 0.0, 1.0)]
        assert child.escalate(0.5)
        assert not child.escalate(1.0)
    finally:
        assert child.proc is not None
        child.proc.kill()
        child.proc.wait(30)
        child.finish()


def test_the_reason_is_the_status_line_of_a_failure(tmp_path: Path) -> None:
    child = _child(tmp_path, "import sys; print('some output'); sys.exit(2)")
    child.status_path = tmp_path / "probe.status"
    write_status("config-error", "node probe: rate_hz: 'fast' is not a number", child.status_path)
    child.start()  # removes the last start's status: it says nothing about this one
    assert child.status() is None
    assert child.proc is not None and child.proc.wait(60) == 2
    assert child.exit_reason(2) == "some output"  # no status: the last line it wrote
    write_status("config-error", "node probe: rate_hz: 'fast'\nis not a number", child.status_path)
    assert child.exit_reason(2) == "node probe: rate_hz: 'fast' | is not a number"
    write_status("running", "", child.status_path)
    assert child.exit_reason(0) == ""  # stopped cleanly: nothing to explain
    assert child.exit_reason(-9) == ""  # a signal: describe_exit says which
    child.finish()


def test_last_line_reads_only_what_this_start_wrote(tmp_path: Path) -> None:
    log = tmp_path / "n.log"
    log.write_bytes(b"old start\nTraceback\nOldError: x\n")
    offset = log.stat().st_size
    assert last_line(log, offset) == ""
    with open(log, "ab") as f:
        f.write(b"[INFO] starting\nValueError: bad \xff value\n\n  \n")
    assert last_line(log, offset) == "ValueError: bad \ufffd value"
    assert last_line(tmp_path / "missing.log", 0) == ""


def _running_then(tmp_path: Path, then: str) -> Child:
    """A node that reports running (as an older node, or one about to be killed, leaves it) and then does `then`."""
    status = tmp_path / "probe.status"
    return _child(tmp_path, f"open({str(status)!r}, 'w').write('running\\n')\nprint('ready', flush=True)\n{then}\n")


def test_a_killed_node_s_stale_running_becomes_failed_once_it_is_gone(tmp_path: Path) -> None:
    child = _running_then(tmp_path, STUBBORN)
    child.start()
    try:
        assert wait_until(lambda: child.status() == NodeStatus("running"), 60.0), child.log_path.read_text()
        assert child.proc is not None
        child.proc.kill()
        assert child.proc.wait(30) == -signal.SIGKILL
    finally:
        if child.proc is not None and child.proc.poll() is None:
            child.proc.kill()
    assert child.finish() == -signal.SIGKILL
    assert child.status() == NodeStatus("failed", "ended by signal SIGKILL")
    assert child.exit_reason(-signal.SIGKILL) == ""  # the console line says the signal already, once


def test_an_exit_recorded_by_the_child_keeps_the_node_s_reason(tmp_path: Path) -> None:
    child = _running_then(tmp_path, "import sys; print('RuntimeError: the arm stopped answering'); sys.exit(1)")
    child.start()
    assert child.proc is not None and child.proc.wait(60) == 1
    assert child.finish() == 1
    assert child.status() == NodeStatus("failed", "RuntimeError: the arm stopped answering")
    assert child.exit_reason(1) == "RuntimeError: the arm stopped answering"
    clean = _running_then(tmp_path, "pass")  # exit 0: stopped, though the node did not say so
    clean.start()
    assert clean.proc is not None and clean.proc.wait(60) == 0
    assert clean.finish() == 0 and read_status(tmp_path / "probe.status") == NodeStatus("stopped")
    assert clean.exit_reason(0) == ""
