"""`user bringup ARGS` as a process of a test: its console in a file, stopped with SIGINT like Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from test.conftest import user_cmd

STOP_S = 60.0  # SIGINT to exit: every node's shutdown allowance, on a loaded machine


class BringupProcess:
    """One `user bringup`, started in `cwd` (where a default run directory goes), its output in `out`."""

    def __init__(self, args: list[str], out: Path, cwd: Path | None = None) -> None:
        self.out = out
        with open(out, "wb") as f:
            self.proc = subprocess.Popen(user_cmd("bringup", *args), cwd=cwd, stdout=f, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def stop(self) -> int:
        """Ctrl-C, and its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(STOP_S)


def kill_left(started: list[BringupProcess]) -> None:
    """A test's teardown: kill whatever of `started` still runs (a test that failed before stopping them)."""
    for run in started:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(10)
