"""`SdkProcess`: the node's end of the ARX SDK's own process (`user.robots.arx_process`), each call with a deadline.

The SDK can stop answering for good (its emergency state is an endless loop: arx5-sdk src/app/controller_base.cpp
`enter_emergency_state_`) and its calls hold the GIL, so it runs in a child process in its own session (the
terminal's Ctrl-C reaches only the node). Each `call` waits for the answer up to its deadline; a call that does
not return in time ends the process (SIGKILL: the SDK ignores everything else while stuck) and raises
`ArxSdkError`, as does a process that died. The SDK's log lines (spdlog on the child's stdout) are passed on to
the `user.robots.arx5_sdk` logger, and its recent error lines are quoted in those errors, so the one line the
operator reads says why (e.g. "Gripper position error: ...").
"""

from __future__ import annotations

import collections
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

from user.robots.arx_errors import ArxError, ArxSdkError

_sdk_log = logging.getLogger("user.robots.arx5_sdk")
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the `user` package this module came from
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from user.robots.arx_process import main; sys.exit(main(sys.argv[1:]))"
)
# spdlog pattern of the SDK's logger: "[%H:%M:%S %n %^%l%$] %v" (controller_base.cpp)
_SDK_LINE = re.compile(r"^\[\S+ \S+ (?P<level>\w+)\] (?P<text>.*)$")
EXIT_WAIT_S = 2.0  # how long a process that was ended or asked to close may take to go


class SdkProcess:
    """The SDK's child process: `start`, `call` (with a deadline each) and `stop`."""

    def __init__(self, module: str = "arx5_interface", path: Sequence[str] = ()) -> None:
        """`module`: the SDK's module name; `path`: folders the child puts first on sys.path (a stand-in SDK)."""
        self._module, self._path = module, tuple(path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._errors: collections.deque[str] = collections.deque(maxlen=3)
        self._lock = threading.Lock()  # one request on the pipe at a time

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float) -> None:
        """Start the child and wait until it has imported the SDK; `ArxError` when it cannot."""
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, _ROOT, str(theirs.fileno()), self._module, *self._path],
                pass_fds=(theirs.fileno(),),
                stdout=subprocess.PIPE,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        self._errors.clear()
        self._reader = threading.Thread(target=self._read_log, args=(self._proc.stdout,), daemon=True, name="arx5-log")
        self._reader.start()
        self._receive("loading the ARX SDK", timeout_s)

    def call(self, op: str, *args: Any, what: str, timeout_s: float) -> Any:
        """Ask the child to run `op(*args)` and return its answer within `timeout_s`."""
        if not self._lock.acquire(timeout=timeout_s):
            raise ArxSdkError(f"{what}: another call into the ARX SDK did not finish within {timeout_s:g} s")
        try:
            conn = self._conn
            if conn is None or self._proc is None:
                raise ArxSdkError(f"{what}: the ARX SDK's process is not running (connect() first)")
            try:
                conn.send((op, args))
            except OSError:
                raise self._died(what) from None
            return self._receive(what, timeout_s)
        finally:
            self._lock.release()

    def stop(self, timeout_s: float) -> str | None:
        """Ask the child to damp the arm and exit; end it when it does not. Returns what went wrong, if anything."""
        problem = None
        if self.running:
            try:
                self.call("close", what="switching the arm to damping", timeout_s=timeout_s)
            except ArxError as exc:
                problem = str(exc)
        self._end(kill=False)
        return problem

    # ---- internals ----------------------------------------------------------------------------------

    def _receive(self, what: str, timeout_s: float) -> Any:
        conn, proc = self._conn, self._proc
        if conn is None or proc is None:
            raise ArxSdkError(f"{what}: the ARX SDK's process is not running (connect() first)")
        try:
            ready = conn.poll(timeout_s)
        except OSError:
            ready = True  # the socket broke: recv reports EOF
        if not ready:
            self._end(kill=True)
            raise ArxSdkError(
                f"the ARX SDK did not answer within {timeout_s:g} s while {what}; its process (pid {proc.pid}) was "
                f"ended{self._sdk_said()}; check the arm (limp, or holding its last command) and restart the node"
            )
        try:
            reply = conn.recv()
        except (EOFError, OSError):
            raise self._died(what) from None
        if reply[0] == "ok":
            return reply[1]
        _, kind, message = reply
        raise ArxError(f"{what}: the ARX SDK raised {kind}: {message}")

    def _died(self, what: str) -> ArxSdkError:
        proc = self._proc
        pid = None if proc is None else proc.pid
        self._end(kill=False)  # waits for the exit code
        code = None if proc is None else proc.returncode
        how = "ended"
        if code is not None:
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return ArxSdkError(
            f"the ARX SDK's process (pid {pid}) {how} while {what}{self._sdk_said()}; "
            "check the arm (limp, or holding its last command) and restart the node"
        )

    def _end(self, kill: bool) -> None:
        """Make sure the child is gone and its pipe and log reader are closed. `kill`: at once (it is stuck),
        else after EXIT_WAIT_S (it exits by itself when its pipe closes)."""
        proc, conn, reader = self._proc, self._conn, self._reader
        self._proc = self._conn = self._reader = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if kill:
                proc.kill()
            try:
                proc.wait(EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(EXIT_WAIT_S)
        if reader is not None:
            reader.join(EXIT_WAIT_S)  # the log's last lines, for the error message

    def _read_log(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        with stream:
            for raw in stream:
                line = raw.decode("utf-8", "replace").rstrip()
                match = _SDK_LINE.match(line)
                if match is not None and match["level"] in ("error", "critical"):
                    self._errors.append(match["text"])
                if line:
                    _sdk_log.info("%s", line)  # as the SDK prints it; the driver's error quotes its errors

    def _sdk_said(self) -> str:
        return f"; the SDK said: {' | '.join(self._errors)}" if self._errors else ""
