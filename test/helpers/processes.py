"""A node (or any command) as a subprocess whose combined output goes to a file the test can poll, and a
factory fixture helper that kills whatever a test left running."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from test.conftest import wait_until


class LoggedProcess:
    """`argv` running with its stdout and stderr in `log`."""

    def __init__(self, argv: list[str], env: dict[str, str] | None, log: Path) -> None:
        self.log = log
        self._file = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, env=env, stdout=self._file, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, fragment: str, timeout_s: float = 20.0) -> bool:
        return wait_until(lambda: fragment in self.text(), timeout_s, 0.05)

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 10.0) -> tuple[int, float]:
        """Send `sig` and wait; (exit code, seconds it took)."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        finally:
            self._file.close()
        return code, time.monotonic() - start


def started_processes(
    command: Callable[[list[str]], list[str]], env: dict[str, str] | None, logs: Path
) -> Iterator[Callable[..., LoggedProcess]]:
    """Body of a fixture: `start(*args)` runs `command(args)`; every process still alive is killed after."""
    started: list[LoggedProcess] = []

    def start(*args: str) -> LoggedProcess:
        process = LoggedProcess(command(list(args)), env, logs / f"node{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(5)
