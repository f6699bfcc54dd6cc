"""One supervised process of `user bringup`: started with its own log file and status file, asked to stop with
SIGINT, then SIGTERM, then SIGKILL, each with a deadline, and read back for why it exited.

Stopping is split into `interrupt` (send SIGINT now) and `escalate` (called while waiting: the next signal once
the current one's allowance is over), so that a supervisor stops many children at the same time.

Once the process is gone (`finish`), its status file says how it ended: a node writes that itself, and when it
could not (SIGKILL, a crash: the file still says starting or running) the child writes it from the exit code.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from user.deploy.respawn import NodeLife
from user.runtime.status import REASONED, NodeStatus, one_line, read_status, record_exit

_log = logging.getLogger("user.bringup")

SIGTERM_GRACE_S = 1.0  # after SIGTERM, how long before SIGKILL
SIGKILL_GRACE_S = 1.0  # after SIGKILL, how long before giving up on the process
LOG_TAIL_BYTES = 65536  # how much of a log is read for the last line a failed node wrote


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the supervisor dies (Linux), so no node outlives a kill -9."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def last_line(path: Path, offset: int) -> str:
    """The last non-empty line written to `path` after byte `offset` ('' when none)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - LOG_TAIL_BYTES))
            tail = f.read()
    except OSError:
        return ""
    lines = [line.strip() for line in tail.decode("utf-8", errors="replace").splitlines() if line.strip()]
    return one_line(lines[-1]) if lines else ""


@dataclass
class Child:
    """A supervised process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    status_path: Path | None = None  # the node's status line (`user.runtime.status`); None: the router
    life: NodeLife | None = None  # how a node is respawned (None: the router)
    screen: bool = False  # also echo the node's output on the supervisor's console
    shutdown_timeout_s: float = 5.0  # SIGINT, then SIGTERM after this
    proc: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    _log_file: IO[bytes] | None = field(default=None, repr=False)
    _log_offset: int = 0  # where this start's output begins in the log file
    _signals: list[tuple[signal.Signals, float, float]] = field(default_factory=list)  # (signal, sent, deadline)
    _reason: str | None = field(default=None, repr=False)  # why the last start exited, as `finish` found it

    def start(self) -> None:
        if self.status_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.status_path.unlink()  # a status left by an earlier start says nothing about this one
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - kept open while the child runs
        self._log_offset = self._log_file.tell()
        self._signals = []
        self._reason = None
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.screen else self._log_file,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,  # our own SIGINT ordering, not the terminal's
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only calls prctl, async-signal-safe
        )
        if self.screen:
            threading.Thread(target=self._tee, args=(self.proc, self._log_file), daemon=True).start()
        _log.info("started %s (pid %d), log: %s", self.name, self.proc.pid, self.log_path)

    @staticmethod
    def _tee(proc: subprocess.Popen[bytes], log: IO[bytes]) -> None:
        """Copy the child's output to its log file and the console, line by line, until it exits."""
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            with contextlib.suppress(ValueError, OSError):  # the log file closed at shutdown
                log.write(line)
                log.flush()
            with contextlib.suppress(ValueError, OSError):
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self) -> NodeStatus | None:
        return read_status(self.status_path) if self.status_path is not None else None

    def exit_reason(self, code: int | None) -> str:
        """Why the process exited, in one line: the reason it wrote as its status, else (a failure) the last line
        of its output since it started; '' when it gave none (a signal killed it, or it stopped cleanly). After
        `finish`, the reason as it was before the child recorded the exit in the status file itself."""
        if self._reason is not None:
            return self._reason
        status = self.status()
        if status is not None and status.state in REASONED and status.reason:
            return status.reason
        if code is not None and code > 0:
            return last_line(self.log_path, self._log_offset)
        return ""

    @property
    def stopping(self) -> bool:
        return bool(self._signals)

    def _send(self, sig: signal.Signals, grace_s: float, now: float) -> None:
        self._signals.append((sig, now, now + grace_s))
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def interrupt(self, now: float) -> None:
        """Ask the process to stop (SIGINT) unless already asked; `escalate` takes it from there."""
        if not self._signals and self.alive():
            self._send(signal.SIGINT, self.shutdown_timeout_s, now)

    def escalate(self, now: float) -> bool:
        """While stopping: SIGTERM once SIGINT's allowance is over, SIGKILL after SIGTERM's. False when even
        SIGKILL's grace is over (nothing left to try)."""
        if not self._signals or not self.alive():
            return True
        sig, sent, deadline = self._signals[-1]
        if now < deadline:
            return True
        if sig == signal.SIGKILL:
            return False
        following = signal.SIGTERM if sig == signal.SIGINT else signal.SIGKILL
        _log.warning(
            "%s did not stop within %.1f s of %s; sending %s", self.name, deadline - sent, sig.name, following.name
        )
        self._send(following, SIGTERM_GRACE_S if following == signal.SIGTERM else SIGKILL_GRACE_S, now)
        return True

    def finish(self) -> int | None:
        """After the process exited: close its log, record how it ended where it could not (`record_exit`); its
        exit code."""
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._signals = []
        code = self.proc.poll() if self.proc is not None else None
        if code is not None and self.status_path is not None and self._reason is None:
            self._reason = self.exit_reason(code)
            record_exit(self.status_path, code, self._reason)
        return code
