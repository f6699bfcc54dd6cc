"""`user bringup`: start every node of a deployment as its own process on the Zenoh runtime.

Per-node log and status files, a router started when none is running (within `router.start_timeout_s`), the
respawn rules of `user.deploy.respawn` with each exit and its reason in one console line, a start deadline per
node, and a shutdown of all nodes at once: SIGINT to each (in reverse start order), SIGTERM to those still
running after their `shutdown_timeout_s`, SIGKILL after that, the router last. So Ctrl-C takes as long as the
slowest node's allowance, not the sum of all of them.

The exit code is 0 when every node ran and stopped cleanly, 1 when one failed for good or did not stop
cleanly. A required node gone for good stops the deployment at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from user.bus.router import router_reachable
from user.bus.zenoh_config import ENV_CONFIG
from user.deploy.child import Child
from user.deploy.commands import NodeLaunch, launches
from user.deploy.deployment import Deployment
from user.deploy.respawn import NodeLife, Outcome, RunCompletion
from user.deploy.site_env import node_env, router_config
from user.deploy.sites import SINGLE_SITE, Site
from user.runtime.status import ENV_STATUS_FILE, RUNNING

_log = logging.getLogger("user.bringup")

POLL_S = 0.1  # how often children are checked
ROUTER_PROBE_S = 0.5  # one reachability probe of the router
ROUTER_MAX_RESTARTS = 5  # routers that keep dying stop the deployment
ZENOH_DIR = "zenoh"  # under the log directory: the Zenoh config files of a secured deployment's processes
CLEAN_EXITS = (0, -signal.SIGINT)  # how a node stopped by SIGINT may end


class BringupError(RuntimeError):
    """The deployment could not be started."""


def sites_here(deployment: Deployment, names: list[str] | None) -> list[Site]:
    """The sites whose routers and nodes this host starts: those `--site` names, or every site."""
    known = {site.name: site for site in deployment.routers()}
    unknown = [name for name in names or [] if name not in known]
    if unknown:
        raise BringupError(f"--site {', '.join(unknown)}: not a site of {deployment.name} ({', '.join(known)})")
    return [site for name, site in known.items() if not names or name in names]


class Supervisor:
    """Owns the router and node processes of one deployment."""

    def __init__(self, deployment: Deployment, log_dir: Path | None = None, sites: list[str] | None = None) -> None:
        self.deployment = deployment
        default = deployment.log_dir.replace("{run_dir}", f"runs/{deployment.name}").replace("{name}", deployment.name)
        self.log_dir = log_dir or Path(default)  # unbound deployments (no run directory) log under runs/<name>
        self.sites = sites_here(deployment, sites)  # started on this host
        self.children: list[Child] = []
        self.routers: dict[str, Child] = {}  # by site name: the routers this supervisor started
        self.router_restarts = 0  # times a router was started again after it exited
        self.stop_event = threading.Event()
        self.failed = False
        self.started_at = time.monotonic()  # `start()` sets it again: the bringup progress lines count from there

    @property
    def router(self) -> Child | None:
        """The router of a deployment without sites (None when one was already running)."""
        return self.routers.get(SINGLE_SITE)

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def start_router(self, site: Site | None = None) -> None:
        """Start `site`'s router (the first site's by default) unless `router.start` says to use a running one."""
        site = site or self.sites[0]
        cfg = self.deployment.router
        config_file = router_config(self.deployment, site, self.log_dir / ZENOH_DIR)
        running = router_reachable(site.endpoints, ROUTER_PROBE_S, config_file)
        if cfg.start == "never" or (cfg.start == "auto" and running):
            if not running:
                raise BringupError(f"no Zenoh router answers at {', '.join(site.endpoints)} and router.start is never")
            _log.info("using the Zenoh router already running at %s", ", ".join(site.endpoints))
            return
        env = self._env({ENV_CONFIG: config_file} if config_file else {})
        name = site.identity if site.name else "router"
        router = Child(name, self.router_argv(site), env, self.log_dir / f"{name}.log")
        self.routers[site.name] = router
        router.start()
        deadline = time.monotonic() + site.start_timeout_s
        while not router_reachable(site.endpoints, ROUTER_PROBE_S, config_file):
            if self.stop_event.is_set():
                return
            if not router.alive() or time.monotonic() > deadline:
                raise BringupError(
                    f"the {site.label} did not come up on {', '.join(site.endpoints)} within "
                    f"{'router' if not site.name else 'sites.' + site.name}.start_timeout_s "
                    f"({site.start_timeout_s:g} s); see {router.log_path}"
                )

    def router_argv(self, site: Site) -> list[str]:
        """The router's command line: `user router` on the site's endpoints, dialling the sites it links to."""
        argv = [sys.executable, "-m", "user", "router"]
        for endpoint in site.listen:
            argv += ["--listen", endpoint]
        for endpoint in site.connect:
            argv += ["--connect", endpoint]
        return argv

    def _child(self, launch: NodeLaunch, site: Site, completion: RunCompletion) -> Child:
        status = self.log_dir / f"{launch.name}.status"
        where = node_env(self.deployment, site, launch.name, self.log_dir / ZENOH_DIR)
        return Child(
            name=launch.name,
            argv=launch.zenoh_command(),
            env=self._env({**launch.env, **where, ENV_STATUS_FILE: str(status)}),
            log_path=self.log_dir / f"{launch.name}.log",
            status_path=status,
            life=NodeLife(launch, completion),
            screen=launch.output == "screen",
            shutdown_timeout_s=launch.shutdown_timeout_s,
        )

    def _start(self, child: Child) -> None:
        child.start()
        if child.life is not None:
            child.life.started(time.monotonic())

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for site in self.sites:
            self.start_router(site)
            if self.stop_event.is_set():
                return
        here = {site.name: site for site in self.sites}
        site_of = {node.name: node.site for node in self.deployment.nodes}
        mine = [launch for launch in launches(self.deployment) if site_of[launch.name] in here]  # not other hosts'
        completion = RunCompletion.of(mine)
        for launch in mine:
            if self.stop_event.is_set():  # Ctrl-C while starting: start no more
                return
            child = self._child(launch, here[site_of[launch.name]], completion)
            self._start(child)
            self.children.append(child)

    def check_children(self) -> None:
        """Notice starts and exits, stop nodes that did not start in time, respawn what should be respawned."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    self._start(child)
            elif child.alive():
                self._watch(child, now)
            elif child.proc is not None:
                self._exited(child, now)
        for site in self.sites:
            router = self.routers.get(site.name)
            if router is not None and not router.alive():
                self._router_exited(site, router)

    def _router_exited(self, site: Site, router: Child) -> None:
        """A router holds no state: start it again (nodes reconnect to its endpoints); give up after a few."""
        code = router.finish()
        self.router_restarts += 1
        if self.router_restarts > ROUTER_MAX_RESTARTS:
            _log.error(
                "the Zenoh router exited with code %s, restarted %d times already; stopping the deployment",
                code,
                ROUTER_MAX_RESTARTS,
            )
            self.failed = True
            self.stop_event.set()
            return
        _log.warning("the %s exited with code %s; starting it again (the nodes reconnect)", site.label, code)
        del self.routers[site.name]
        try:
            self.start_router(site)
        except BringupError as exc:
            _log.error("%s; stopping the deployment", exc)
            self.failed = True
            self.stop_event.set()

    def _watch(self, child: Child, now: float) -> None:
        """A running child: did it report running, is it late, has it been healthy long enough?"""
        life = child.life
        if child.stopping:
            child.escalate(now)
        elif life is None:
            return
        elif not life.running:
            status = child.status()
            if status is not None and status.state == RUNNING:
                after = life.reported_running(now)
                ready = sum(1 for c in self.children if c.life is not None and c.life.running)
                _log.info(
                    "[%d/%d] %s is running (%.1f s after its start, %.1f s into the bringup)",
                    ready,
                    len(self.children),
                    child.name,
                    after,
                    now - self.started_at,
                )
            elif life.overdue(now):
                _log.error(
                    "%s did not report running within %g s (its start_timeout_s); stopping it",
                    child.name,
                    life.launch.start_timeout_s,
                )
                child.interrupt(now)
        elif life.reset_if_healthy(now):
            _log.info(
                "%s has run %g s since its start: its respawn count is reset", child.name, life.launch.respawn_reset_s
            )

    def _exited(self, child: Child, now: float) -> None:
        code = child.finish()
        assert child.life is not None
        verdict = child.life.exited(code, child.exit_reason(code), now)
        if verdict.outcome is Outcome.RESPAWN:
            _log.warning("%s", verdict.line)
            child.restart_at = now + verdict.delay_s
            return
        child.proc = None
        if verdict.outcome is Outcome.FINISHED:
            _log.info("%s", verdict.line)
            return
        if verdict.outcome is Outcome.COMPLETE:  # the others are stopped as on Ctrl-C; bringup exits 0
            _log.info("%s", verdict.line)
            self.stop_event.set()
            return
        _log.error("%s", verdict.line)
        self.failed = True
        if verdict.stops_deployment:
            self.stop_event.set()

    def run(self) -> int:
        """Start everything and supervise until a signal or a required node is gone; then stop everything."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop_event.set())
        try:
            self.start()
            while not self.stop_event.wait(POLL_S):
                self.check_children()
        except (BringupError, OSError) as exc:
            _log.error("%s", exc)
            self.failed = True
        finally:
            self.shutdown()
        return 1 if self.failed else 0

    def shutdown(self) -> None:
        """Stop every node at once (SIGINT in reverse start order), then the routers."""
        self._stop_together([c for c in reversed(self.children) if c.alive()])
        self._stop_together([router for router in self.routers.values() if router.alive()])

    def _stopped(self, child: Child) -> None:
        code = child.finish()
        if child in self.routers.values():
            _log.info("stopped %s", "the Zenoh router" if child is self.router else child.name)
            return
        _log.info("stopped %s (exit code %s)", child.name, code)
        if code not in CLEAN_EXITS:
            self.failed = True

    def _stop_together(self, children: list[Child]) -> None:
        """SIGINT to each child now, then escalate each on its own deadlines until all exited."""
        now = time.monotonic()
        for child in children:
            child.interrupt(now)
        pending = list(children)
        while pending:
            now = time.monotonic()
            for child in list(pending):
                if not child.alive():
                    pending.remove(child)
                    self._stopped(child)
                elif not child.escalate(now):
                    _log.error("%s did not exit even after SIGKILL; leaving it", child.name)
                    pending.remove(child)
                    self.failed = True
            if pending and pending[0].proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    pending[0].proc.wait(POLL_S)
