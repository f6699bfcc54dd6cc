"""Running ROS 2's own tools in tests: `ros2 launch` of this package, and `ros2 topic/param/node` verbs.

Every process inherits the test run's DDS settings (loopback only, its own domain: test/conftest.py).
`ros2` verbs use a ROS 2 daemon (`ros2_daemon`, started and stopped by the tests that need it): without
one, each `ros2` call discovers the graph anew and may not have found a node yet when it asks.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from test.conftest import REPO

LAUNCH_STOP_S = 60.0  # a launch stopped with SIGINT must have ended within this


def install_only_env() -> dict[str, str]:
    """The environment without this checkout's sources: the package exactly as colcon installed it."""
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != src)
    return env


def ros2(*args: str, timeout_s: float = 60.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`ros2 ARGS...` (add `--no-daemon` yourself where the verb takes it)."""
    return subprocess.run(["ros2", *args], capture_output=True, text=True, timeout=timeout_s, env=env)


@contextlib.contextmanager
def ros2_daemon() -> Iterator[None]:
    """A ROS 2 daemon for this test run's domain while the block runs."""
    ros2("daemon", "stop")
    started = ros2("daemon", "start")
    assert started.returncode == 0, started.stderr
    try:
        yield
    finally:
        ros2("daemon", "stop")


def ros2_until(
    *args: str, want: str, timeout_s: float = 30.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`ros2 ARGS...` again until its output contains `want` (a node or topic just started may not be
    discovered yet); the last run when the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = ros2(*args, timeout_s=max(10.0, timeout_s), env=env)
        if want in proc.stdout or time.monotonic() >= deadline:
            return proc
        time.sleep(0.3)


class Launch:
    """`ros2 launch user bringup.launch.py ARGS` in its own session, its output in `log_path`."""

    def __init__(self, log_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            ["ros2", "launch", "user", "bringup.launch.py", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout_s: float) -> re.Match[str] | None:
        """The first match of `pattern` in the output, waiting up to `timeout_s` (None: not seen)."""
        deadline = time.monotonic() + timeout_s
        while True:
            match = re.search(pattern, self.output())
            if match or time.monotonic() >= deadline or self.proc.poll() is not None:
                return match or re.search(pattern, self.output())
            time.sleep(0.2)

    def pids(self) -> dict[str, int]:
        """Process name (user_node-N) -> the pid launch reported for it, latest start wins."""
        return {
            m[0]: int(m[1])
            for m in re.findall(r"\[INFO\] \[(user_node-\d+)\]: process started with pid \[(\d+)\]", self.output())
        }

    def stop(self, timeout_s: float = LAUNCH_STOP_S) -> int:
        """Ctrl-C (SIGINT to launch, which stops its nodes in turn); returns launch's exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self.kill()

    def kill(self) -> None:
        """Whatever is left of the launch's session."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._log.close()


@contextlib.contextmanager
def launched(log_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Launch]:
    launch = Launch(log_path, *args, env=env)
    try:
        yield launch
    finally:
        launch.kill()
