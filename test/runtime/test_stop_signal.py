"""The shutdown of a node process (`user.runtime.runner.StopSignal`), in a subprocess of its own: the deadline runs
from the first signal, even while the node is still starting; a repeated SIGINT is ignored; a SIGTERM after the
first signal (the launcher giving up) ends the process at once with code 3."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from test.conftest import wait_until
from user.runtime.runner import ENV_SHUTDOWN_DEADLINE
from user.runtime.status import EXIT_SHUTDOWN_TIMEOUT

LONG_S = 120.0  # a deadline no test here waits for


def _probe(tmp_path: Path, deadline_s: float, after_install: str) -> tuple[subprocess.Popen[bytes], Path]:
    code = (
        "import threading\n"
        "from user.runtime.logs import setup_logging\n"
        "from user.runtime.runner import StopSignal\n"
        "setup_logging()\n"
        "stop = StopSignal()  # its deadline from the environment, as a launcher sets it\n"
        "print('ready', flush=True)\n"
        f"{after_install}\n"
    )
    out = tmp_path / "probe.out"
    with open(out, "wb") as f:
        env = dict(os.environ, **{ENV_SHUTDOWN_DEADLINE: str(deadline_s)})
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=f, stderr=subprocess.STDOUT, env=env)
    return proc, out


def _wait_for(out: Path, text: str) -> bool:
    return wait_until(lambda: text in out.read_text(errors="replace"), 60.0)


def test_a_signal_while_the_node_is_still_starting_ends_it_at_its_deadline(tmp_path: Path) -> None:
    """A node whose construction never ends: without a deadline from the signal on, only SIGKILL would end it."""
    proc, out = _probe(tmp_path, 0.5, "threading.Event().wait(600)  # a constructor that hangs")
    try:
        assert _wait_for(out, "ready"), out.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == EXIT_SHUTDOWN_TIMEOUT, out.read_text()
    finally:
        proc.kill()
        proc.wait(10)
    assert "did not shut down within 0.5 s; exiting anyway" in out.read_text()


def test_sigterm_after_sigint_ends_a_stuck_shutdown_at_once(tmp_path: Path) -> None:
    hang = "stop.wait()\nprint('stopping', flush=True)\nthreading.Event().wait(600)  # a destroy that hangs"
    proc, out = _probe(tmp_path, LONG_S, hang)
    try:
        assert _wait_for(out, "ready"), out.read_text()
        proc.send_signal(signal.SIGINT)
        assert _wait_for(out, "stopping"), out.read_text()
        proc.send_signal(signal.SIGINT)  # the terminal's and the launcher's: the second one changes nothing
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == EXIT_SHUTDOWN_TIMEOUT, out.read_text()
    finally:
        proc.kill()
        proc.wait(10)
    assert "got SIGTERM while shutting down; exiting now" in out.read_text()


def test_a_finished_shutdown_disarms_the_deadline(tmp_path: Path) -> None:
    body = "stop.wait()\nstop.done()\nthreading.Event().wait(2.0)\nprint('still here', flush=True)"
    proc, out = _probe(tmp_path, 0.2, body)
    try:
        assert _wait_for(out, "ready"), out.read_text()
        proc.send_signal(signal.SIGTERM)  # a first SIGTERM is a request to stop, like SIGINT
        assert proc.wait(60) == 0, out.read_text()
    finally:
        proc.kill()
        proc.wait(10)
    assert "still here" in out.read_text() and "exiting anyway" not in out.read_text()
