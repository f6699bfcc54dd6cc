"""`user bringup` of a whole deployment as a subprocess, for benchmarks and fault tests: the children's pids
parsed from its output (a respawned node gets a new one), their memory and CPU sampled from /proc, a clean stop."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STOP_TIMEOUT_S = 90.0
PID_RE = re.compile(r"started (\S+) \(pid (\d+)\)")
TICK_S = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class NodeSamples:
    pids: list[int] = field(default_factory=list)
    rss: list[tuple[float, float]] = field(default_factory=list)  # (wall time, MiB)
    rss_pids: list[int] = field(default_factory=list)  # the process each rss sample is of (respawns change it)
    cpu: list[tuple[float, float]] = field(default_factory=list)  # (wall time, CPU seconds of the current pid)


def read_rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def read_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK_S  # utime, stime


class Bringup:
    """`user bringup` of one deployment; parses the children's pids from its output; samples their memory."""

    def __init__(self, config: Path, run_dir: Path, out: Path) -> None:
        self.out = out
        self._file = open(out, "ab")  # noqa: SIM115 - closed in stop()
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "user", "bringup", str(config), "--run-dir", str(run_dir)],
            stdout=self._file,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        self.nodes: dict[str, NodeSamples] = {}
        self.load: list[tuple[float, float]] = []  # (wall time, 1-minute load average of the machine)
        self._sampling = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pids(self) -> dict[str, int]:
        """Newest pid of every child (a respawned node gets a new one)."""
        found: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for name, pid in PID_RE.findall(self.out.read_text(errors="replace")):
                found[name] = int(pid)
        return found

    def sample(self) -> None:
        now = time.time()
        self.load.append((now, os.getloadavg()[0]))
        for name, pid in self.pids().items():
            node = self.nodes.setdefault(name, NodeSamples())
            if not node.pids or node.pids[-1] != pid:
                node.pids.append(pid)
            rss, cpu = read_rss_mib(pid), read_cpu_s(pid)
            if rss is not None:
                node.rss.append((now, rss))
                node.rss_pids.append(pid)
            if cpu is not None:
                node.cpu.append((now, cpu))

    def start_sampling(self, every_s: float) -> None:
        def loop() -> None:
            while not self._stop.wait(every_s):
                self.sample()

        self.sample()
        self._thread = threading.Thread(target=loop, name="rss-sampler", daemon=True)
        self._thread.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10.0)
        self._file.close()
        return self.proc.returncode

    def stop_and_report(self, label: str) -> int | None:
        """`stop`, and a non-zero exit code printed as a WARNING with the lines that say which node exited badly
        (the last lines of the output when none does)."""
        code = self.stop()
        if code not in (0, None):
            lines = self.out.read_text(errors="replace").splitlines()
            exits = [line for line in lines if "exit" in line and "exit code 0" not in line] or lines[-15:]
            print(f"[{label}] WARNING: user bringup exited with {code} at shutdown:", *exits, sep="\n  ", flush=True)
        return code


def wait_for(predicate: Callable[[], bool], timeout_s: float, alive: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if not alive():
            raise RuntimeError(f"user bringup exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)
