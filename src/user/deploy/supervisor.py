"""`user bringup`: start every node of a deployment as its own process on the Zenoh runtime.

Per-node log files, a respawn policy, a router started when none is running, and ordered shutdown
(reverse start order; SIGINT, then SIGTERM, then SIGKILL, each with a deadline).
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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from user.bus.router import router_reachable
from user.deploy.commands import NodeLaunch, launches
from user.deploy.deployment import Deployment

_log = logging.getLogger("user.bringup")

POLL_S = 0.1  # how often children are checked
ROUTER_START_TIMEOUT_S = 10.0  # a started router must answer within this


class BringupError(RuntimeError):
    """The deployment could not be started."""


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the supervisor dies (Linux), so no node outlives a kill -9."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class Child:
    """A supervised process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    launch: NodeLaunch | None = None  # how a node is started and respawned (None: the router)
    screen: bool = False  # also echo the node's output on the supervisor's console
    shutdown_timeout_s: float = 5.0  # SIGINT, then SIGTERM after this
    proc: subprocess.Popen[bytes] | None = None
    respawns: int = 0
    restart_at: float | None = None
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - kept open while the child runs
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

    def stop(self, timeout_s: float) -> int | None:
        """SIGINT, then SIGTERM, then SIGKILL; returns the exit code."""
        if self.proc is None:
            return None
        for sig, wait_s in ((signal.SIGINT, timeout_s), (signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0)):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                _log.warning("%s did not stop on %s within %.1f s", self.name, signal.Signals(sig).name, wait_s)
        if self._log_file is not None:
            self._log_file.close()
        return self.proc.poll()


class Supervisor:
    """Owns the router and node processes of one deployment."""

    def __init__(self, deployment: Deployment, log_dir: Path | None = None) -> None:
        self.deployment = deployment
        default = deployment.log_dir.replace("{run_dir}", f"runs/{deployment.name}").replace("{name}", deployment.name)
        self.log_dir = log_dir or Path(default)  # unbound deployments (no run directory) log under runs/<name>
        self.children: list[Child] = []
        self.router: Child | None = None
        self.stop_event = threading.Event()
        self.failed = False

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        env["USER_ZENOH_ROUTER"] = ",".join(self.deployment.router.endpoints)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def start_router(self) -> None:
        cfg = self.deployment.router
        running = router_reachable(cfg.endpoints, timeout_s=0.5)
        if cfg.start == "never" or (cfg.start == "auto" and running):
            if not running:
                raise BringupError(f"no Zenoh router answers at {', '.join(cfg.endpoints)} and router.start is never")
            _log.info("using the Zenoh router already running at %s", ", ".join(cfg.endpoints))
            return
        argv = [sys.executable, "-m", "user", "router"]
        for endpoint in cfg.endpoints:
            argv += ["--listen", endpoint]
        self.router = Child("router", argv, self._env({}), self.log_dir / "router.log")
        self.router.start()
        deadline = time.monotonic() + ROUTER_START_TIMEOUT_S
        while not router_reachable(cfg.endpoints, timeout_s=0.5):
            if not self.router.alive() or time.monotonic() > deadline:
                raise BringupError(
                    f"the Zenoh router did not come up on {', '.join(cfg.endpoints)}; see {self.router.log_path}"
                )
            time.sleep(0.1)

    def _child(self, launch: NodeLaunch) -> Child:
        return Child(
            name=launch.name,
            argv=launch.zenoh_command(),
            env=self._env(launch.env),
            log_path=self.log_dir / f"{launch.name}.log",
            launch=launch,
            screen=launch.output == "screen",
            shutdown_timeout_s=launch.shutdown_timeout_s,
        )

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.start_router()
        for launch in launches(self.deployment):
            child = self._child(launch)
            child.start()
            self.children.append(child)

    def check_children(self) -> None:
        """Notice exits and respawn what should be respawned."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.respawns += 1
                    child.start()
                continue
            if child.proc is None or child.alive():
                continue
            code = child.proc.returncode
            if child.launch is not None and child.launch.may_respawn(child.respawns):
                delay = child.launch.respawn_delay_s
                _log.warning("%s exited with code %s; respawning in %.1f s", child.name, code, delay)
                child.restart_at = now + delay
            else:
                _log.error("%s exited with code %s", child.name, code)
                child.proc = None
                self.failed = self.failed or code != 0
        if self.router is not None and not self.router.alive():
            _log.error("the Zenoh router exited; stopping the deployment")
            self.failed = True
            self.stop_event.set()

    def run(self) -> int:
        """Start everything and supervise until a signal; then stop everything in reverse order."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop_event.set())
        try:
            self.start()
            while not self.stop_event.wait(POLL_S):
                self.check_children()
        except BringupError as exc:
            _log.error("%s", exc)
            self.failed = True
        finally:
            self.shutdown()
        return 1 if self.failed else 0

    def shutdown(self) -> None:
        for child in reversed(self.children):
            if child.alive():
                code = child.stop(child.shutdown_timeout_s)
                _log.info("stopped %s (exit code %s)", child.name, code)
                if code not in (0, -signal.SIGINT):
                    self.failed = True
        if self.router is not None and self.router.alive():
            self.router.stop(self.deployment.shutdown_timeout_s)
            _log.info("stopped the Zenoh router")
