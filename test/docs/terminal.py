"""A command of a guide run as a person runs it: in a terminal of its own (a pseudo-terminal that is the
process's controlling terminal, so `/dev/tty` is that terminal and keys can be typed into it), through bash
(`$NAME` expands), with its output in a file the test reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from test.conftest import wait_until

NAMED_KEYS = {"space": " ", "enter": "\r", "tab": "\t"}


# Run in the new session (after setsid): make stdin, the pseudo-terminal, its controlling terminal, then become
# bash running the command (no preexec_fn: forking a threaded test process must run no Python before exec).
_TAKE_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvp('bash', ['bash', '-c', 'exec ' + sys.argv[1]])"
)


class Terminal:
    """`command` running in its own session on a fresh pseudo-terminal; stdout and stderr go to `log`."""

    def __init__(self, command: str, env: dict[str, str], cwd: Path, log: Path) -> None:
        self.command = command
        self.log = log
        master, slave = os.openpty()
        self._master = master
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _TAKE_TERMINAL, command],
                env=env,
                cwd=cwd,
                stdin=slave,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        os.close(slave)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def wait_for(self, found: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `found()` is true; false when the deadline passes or the process exits without it."""
        return wait_until(lambda: found() or self.exited(), timeout_s, 0.05) and found()

    def press(self, key: str) -> None:
        """Type `key` (one character, or space, enter, tab) into the terminal, as a person would."""
        os.write(self._master, NAMED_KEYS.get(key, key).encode())

    def interrupt(self, timeout_s: float) -> int | None:
        """Ctrl-C (SIGINT), then wait; the exit code, or None when it did not end in time (it is killed then)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        if self._master >= 0:
            os.close(self._master)
            self._master = -1
