"""Churn (issue 36): robots join and leave a running deployment at random for `--duration-s`; no episode is lost or
stored twice, and the learner is never restarted.

One deployment under `user bringup` on a private Zenoh router: ONE learner and ONE rollout that serve no robot by
name, only those whose ids match `admit: [churn_*]` (dropped `--leave-after-s` after their announcement is gone),
light SAC as bench/fleet.py. Robots are lock-step gym robots on Pendulum-v1 (`--rate-hz` real time, episodes of
`--episode-steps`), each started by hand (`user node robot`, a process of its own, as
test/deploy/test_fleet_join.py does) with a shared `state_dir`, so a robot restarted with the same id continues
its episode ids and re-sends what its outbox spool holds. A seeded random schedule (`--seed`; printed) starts and
stops them: at most `--max-robots` at once (about half on average: stops get likelier as more run); a start
restarts a stopped id or takes a new one; a stop is, one in three each, SIGINT (clean), SIGKILL, or SIGKILL the
moment an episode's END is seen ("at END": the learner's receipt still in flight, the outbox spool must deliver it).

After the schedule every robot is stopped with SIGINT; each robot whose outbox spool still holds episodes is
restarted until the spools are empty (`--drain-s` deadline); the deployment stops cleanly. Then an independent
read of the buffer's MCAP segments counts, per robot (see bench/churn_probe.py for what "ended" means and how an
episode cut mid-way by a stop is told apart): episodes ended, stored, duplicated, lost, incomplete, cut. The
learner's pid must stay the one it started with, its process alive throughout, and its update count must rise.

Exit code 1 when an episode is lost, duplicated or stored incomplete, the learner restarted, or it stopped updating.

Run: python3 bench/churn.py [--duration-s 600] [--max-robots 6] [--seed N] [--quick] [--dry-run] [--json PATH]
     [--keep]      (--quick: 3 robots, 40 s of churn, about 90 s in all)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from bringup import Bringup, free_port, wait_for
from churn_probe import ChurnProbe, HandRobot, Tally, account, handed_out, pid_alive, spooled, stored_steps, table
from user.bus.router import router_reachable
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ENV_DOMAIN, ENV_ROUTER, ZenohSettings
from user.deploy.deployment import load
from user.deploy.node_params import check_node_params

STATS_TOPIC = "/learner/stats"
PREFIX = "churn_"
LEARNING = {
    "policy_id": "churn_pendulum",
    "algorithm": "sac",
    "mlp": {"state_dim": 3, "action_dim": 1, "hidden": [64, 64]},
    "sac": {"batch_size": 64, "critic_hidden": [64, 64]},
}
POOL_PER_ROBOT = 4  # robot ids available: this many per --max-robots (new ids until they run out)


def deployment(endpoint: str, domain: str, run_dir: Path, leave_after_s: float) -> dict[str, Any]:
    """A learner and a rollout admitting `churn_*`, on a private router; no robot: they are started by hand."""
    fleet = {"admit": [f"{PREFIX}*"], "leave_after_s": leave_after_s}
    learner = {
        **fleet,
        "run_dir": str(run_dir / "learner"),
        "learning": LEARNING,
        "torch_threads": 1,
        "stats_period_s": 0.5,
        "checkpoint_period_s": 3600.0,
        "pacing": {"updates_per_step": 0.05, "min_transitions": 200, "publish_every": 20},
    }
    rollout = {**fleet, "learning": LEARNING, "weights_publisher": "learner", "torch_threads": 1, "apply": "immediate"}
    nodes = [
        {"name": "learner", "kind": "learner", "shutdown_timeout_s": 30.0, "params": learner},
        {"name": "rollout", "kind": "rollout", "params": rollout},
    ]
    return {"name": "bench_churn", "domain": domain, "router": {"endpoints": [endpoint], "start": "always"},
            "nodes": nodes}  # fmt: skip


def robot_params(seed: int, state_dir: Path, rate_hz: float, episode_steps: int) -> dict[str, Any]:
    """A hand-started robot's parameters: a lock-step gym Pendulum, real time, its ids and outbox in `state_dir`."""
    return {
        "driver": "gym",
        "gym_env": "Pendulum-v1",
        "realtime": True,
        "control_rate_hz": rate_hz,
        "max_steps": episode_steps,
        "seed": seed,
        "state_dir": str(state_dir),
        "credit_topic": "",
        "wait_for_consumer_s": 60.0,
    }


class Churn:
    """The deployment, the probe, the hand-started robots and the schedule's record."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.endpoint = f"tcp/127.0.0.1:{free_port()}"
        self.domain = f"churn{uuid.uuid4().hex[:6]}"
        self.run_dir, self.state_dir, self.logs = workdir / "run", workdir / "state", workdir / "robots"
        self.state_dir.mkdir(parents=True)
        self.logs.mkdir(parents=True)
        config = workdir / "churn.yaml"
        dep = deployment(self.endpoint, self.domain, self.run_dir, args.leave_after_s)
        config.write_text(yaml.safe_dump(dep, sort_keys=False))
        self.pool = [f"{PREFIX}{i:02d}" for i in range(args.max_robots * POOL_PER_ROBOT)]
        self.env = {**os.environ, ENV_ROUTER: self.endpoint, ENV_DOMAIN: self.domain, "PYTHONUNBUFFERED": "1"}
        self.running: dict[str, HandRobot] = {}
        self.starts: dict[str, int] = {}  # robot -> times started
        self.stops: dict[str, dict[str, int]] = {}  # robot -> {"SIGINT": n, "SIGKILL": n, "unclean": n, "died": n}
        self.ever_spooled: dict[str, set[int]] = {}
        self.learner_pid: int | None = None
        self.learner_changes: list[str] = []  # what was seen of a learner restart (empty: none)
        self.bringup = Bringup(config, self.run_dir, workdir / "bringup.out")
        self.probe: ChurnProbe | None = None

    def connect(self) -> ChurnProbe:
        wait_for(lambda: router_reachable([self.endpoint], 0.5), 60.0, self.bringup.alive, "the router")
        bus = ZenohBus("bench_churn_probe", ZenohSettings(router=[self.endpoint], domain=self.domain))
        self.probe = ChurnProbe(bus, self.pool, STATS_TOPIC)
        return self.probe

    def start(self, robot: str) -> None:
        n = self.starts[robot] = self.starts.get(robot, 0) + 1
        params = robot_params(1000 * self.pool.index(robot) + n, self.state_dir, self.args.rate_hz,
                              self.args.episode_steps)  # fmt: skip
        self.running[robot] = HandRobot(robot, params, self.env, self.logs / f"{robot}.{n}.log")

    def stop(self, robot: str, sig: str) -> None:
        """SIGINT, SIGKILL, or "at END": SIGKILL the moment the robot's next END arrives (its receipt in flight)."""
        process = self.running.pop(robot)
        if sig == "at END" and self.probe is not None:
            self.probe.kill_at_end(robot, process.proc.pid)
            code = process.stop(None, 3.0 * self.args.episode_steps / self.args.rate_hz + 10.0)
            self.probe.cancel_kill(robot)
        else:
            code = process.stop(signal.SIGINT if sig == "SIGINT" else signal.SIGKILL)
        counts = self.stops.setdefault(robot, {"SIGINT": 0, "SIGKILL": 0, "at END": 0, "unclean": 0, "died": 0})
        counts[sig] += 1
        if sig == "SIGINT" and code != 0:
            starting = "(robot) running" not in process.log.read_text(errors="replace")  # still importing
            counts["unclean"] += not starting
            print(f"  {robot}: SIGINT {'while starting' if starting else ''}, exit code {code} ({process.log})",
                  flush=True)  # fmt: skip
        self.ever_spooled.setdefault(robot, set()).update(spooled(self.state_dir, robot))

    def step(self) -> str:
        """One random start or stop of the schedule; what was done."""
        stopped = [r for r in self.starts if r not in self.running]
        fresh = [r for r in self.pool if r not in self.starts]
        full = len(self.running) >= self.args.max_robots
        if self.running and (full or self.rng.random() < len(self.running) / self.args.max_robots):  # ~half run
            robot = self.rng.choice(sorted(self.running))
            sig = self.rng.choice(["SIGINT", "SIGKILL", "at END"])
            self.stop(robot, sig)
            return f"{sig} {robot}"
        again = bool(stopped) and (not fresh or self.rng.random() < 0.6)
        robot = self.rng.choice(sorted(stopped)) if again else fresh[0]
        self.start(robot)
        return f"{'restart' if again else 'start'} {robot}"

    def check(self) -> None:
        """The learner's pid is the one it started with and alive; robots that died by themselves are noted."""
        pid = self.bringup.pids().get("learner")
        if self.learner_pid is not None and (pid != self.learner_pid or not pid_alive(self.learner_pid)):
            seen = f"learner pid {self.learner_pid} -> {pid if pid != self.learner_pid else 'gone'}"
            if seen not in self.learner_changes:
                self.learner_changes.append(seen)
        for robot in [r for r, p in self.running.items() if not p.alive()]:
            print(f"  {robot} exited by itself (code {self.running[robot].proc.returncode})", flush=True)
            self.stop(robot, "SIGKILL")
            self.stops[robot]["died"] += 1
            self.stops[robot]["SIGKILL"] -= 1

    def pause(self, seconds: float) -> None:
        """The schedule's pause between two actions (not a synchronisation), watching the learner meanwhile."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if not self.bringup.alive():
                raise RuntimeError("user bringup exited during the churn")
            self.check()
            time.sleep(min(0.2, max(0.0, until - time.monotonic())))

    def warm_up(self) -> int:
        """The learner's pid; the first robot started; until the learner updates."""
        probe = self.connect()
        wait_for(lambda: "learner" in self.bringup.pids(), 120.0, self.bringup.alive, "the learner's process")
        self.learner_pid = self.bringup.pids()["learner"]
        self.start(self.pool[0])
        wait_for(lambda: (probe.latest_updates() or 0) > 0, self.args.startup_s, self.bringup.alive,
                 "the learner's first updates")  # fmt: skip
        return probe.latest_updates() or 0

    def churn(self) -> list[tuple[float, str]]:
        lo, hi = (1.0, 4.0) if self.args.quick else (2.0, 8.0)
        t0 = time.monotonic()
        done: list[tuple[float, str]] = []
        while time.monotonic() - t0 < self.args.duration_s:
            self.pause(self.rng.uniform(lo, hi))
            what = self.step()
            done.append((time.monotonic() - t0, what))
            print(f"  {done[-1][0]:6.1f} s  {what}  ({len(self.running)} running)", flush=True)
        for robot in sorted(self.running):
            self.stop(robot, "SIGINT")
        return done

    def drain(self) -> bool:
        """Restart every robot whose spool holds episodes until the spools are empty; False: the deadline passed."""
        deadline = time.monotonic() + self.args.drain_s
        while owing := [r for r in sorted(self.starts) if spooled(self.state_dir, r)]:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            print(f"  draining {len(owing)} outboxes: {', '.join(owing)}", flush=True)
            for robot in owing:
                self.start(robot)
            try:
                empty = lambda: not any(spooled(self.state_dir, r) for r in owing)  # noqa: E731
                wait_for(empty, left, self.bringup.alive, "the outboxes to empty")
            except RuntimeError as exc:
                print(f"  {exc}", flush=True)
            finally:
                for robot in owing:
                    self.stop(robot, "SIGINT")
        return True

    def finish(self) -> tuple[int | None, int | None]:
        """Final learner check; probe closed; the deployment stopped: (updates at the end, bringup exit code)."""
        self.check()
        probe, updates = self.probe, None
        if probe is not None:
            updates = probe.latest_updates()
            probe.destroy()
            probe.bus.close()
        return updates, self.bringup.stop()

    def tallies(self) -> dict[str, Tally]:
        ends = self.probe.snapshot_ends() if self.probe is not None else {}
        ended: dict[str, dict[int, int | None]] = {}
        for robot in self.starts:
            mine: dict[int, int | None] = {e: None for e in self.ever_spooled.get(robot, set())}
            mine.update(ends.get(robot, {}))
            ended[robot] = mine
        handed = {robot: handed_out(self.state_dir, robot) for robot in self.starts}
        return account(ended, stored_steps(self.run_dir / "learner" / "buffer"), handed)

    def process_counts(self) -> dict[str, list[int]]:
        """Per robot: starts, SIGINT, SIGKILL, SIGKILL at END, episodes its stops left in its outbox."""
        counts = {}
        for robot, n in self.starts.items():
            s = self.stops.get(robot, {})
            counts[robot] = [n, s.get("SIGINT", 0), s.get("SIGKILL", 0), s.get("at END", 0)]
            counts[robot].append(len(self.ever_spooled.get(robot, ())))
        return counts

    def learner_lines(self, fragment: str) -> int:
        log = self.run_dir / "logs" / "learner.log"
        text = log.read_text(errors="replace") if log.is_file() else ""
        return len(re.findall(fragment, text))


def run_bench(args: argparse.Namespace, workdir: Path) -> int:
    run = Churn(args, workdir)
    summary: dict[str, Any] = {"seed": args.seed}
    try:
        summary["updates_at_start"] = run.warm_up()
        print(f"learner pid {run.learner_pid} updating; churning for {args.duration_s:g} s", flush=True)
        t0 = time.monotonic()
        summary["schedule"] = run.churn()
        summary["duration_s"] = time.monotonic() - t0
        summary["drained"] = run.drain()
    finally:
        for robot in sorted(run.running):
            run.stop(robot, "SIGKILL")
        summary["updates_at_end"], summary["bringup_exit_code"] = run.finish()
    tallies = run.tallies()
    for key in ("lost", "duplicated", "incomplete"):
        summary[key] = sum(getattr(t, key) for t in tallies.values())
    summary.update(learner_pid=run.learner_pid, learner_restarted="; ".join(run.learner_changes) or "no",
                   joins=run.learner_lines(rf"robot {PREFIX}\d+ joined"),
                   leaves=run.learner_lines(rf"robot {PREFIX}\d+ left"),
                   unclean_stops=sum(s["unclean"] for s in run.stops.values()),
                   robots_died=sum(s["died"] for s in run.stops.values()))  # fmt: skip
    rising = (summary["updates_at_end"] or 0) > summary["updates_at_start"]
    clean = not (summary["lost"] or summary["duplicated"] or summary["incomplete"] or run.learner_changes)
    summary["passed"] = clean and rising
    print(table(tallies, run.process_counts(), summary, args.max_robots), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({**summary, "robots": {r: asdict(t) for r, t in tallies.items()}}, indent=1))
    return 0 if summary["passed"] else 1


def dry_run(args: argparse.Namespace, workdir: Path) -> int:
    """The deployment, plus one hand-started robot's settings as a node of it, loaded as `user bringup` loads it."""
    dep = deployment("tcp/127.0.0.1:7447", "churn", workdir / "run", args.leave_after_s)
    robot = {"robot_id": f"{PREFIX}00", **robot_params(0, workdir / "state", args.rate_hz, args.episode_steps)}
    dep["nodes"].append({"name": f"{PREFIX}00", "kind": "robot", "params": robot})
    path = workdir / "churn.yaml"
    path.write_text(yaml.safe_dump(dep, sort_keys=False))
    checked = load(path)
    check_node_params(checked, path)
    print(f"deployment checked: {len(checked.nodes)} nodes (learner, rollout, a hand-started robot)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration-s", type=float, default=None, help="how long robots churn (default 600)")
    parser.add_argument("--max-robots", type=int, default=None, help="robots running at once at most (default 6)")
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: from the clock)")
    parser.add_argument("--leave-after-s", type=float, default=3.0, help="the deployment's leave deadline")
    parser.add_argument("--rate-hz", type=float, default=20.0, help="steps per second per robot")
    parser.add_argument("--episode-steps", type=int, default=50, help="steps per episode")
    parser.add_argument("--startup-s", type=float, default=300.0, help="longest wait for the learner's first update")
    parser.add_argument("--drain-s", type=float, default=120.0, help="deadline to empty the outboxes at the end")
    parser.add_argument("--quick", action="store_true", help="3 robots, 40 s of churn")
    parser.add_argument("--dry-run", action="store_true", help="write and check the deployment, start nothing")
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the run directory, state and logs")
    args = parser.parse_args(argv)
    args.duration_s = args.duration_s if args.duration_s is not None else (40.0 if args.quick else 600.0)
    args.max_robots = args.max_robots or (3 if args.quick else 6)
    args.seed = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    if args.max_robots < 1 or args.duration_s <= 0 or args.rate_hz <= 0 or args.episode_steps < 1:
        parser.error("--max-robots >= 1, --duration-s > 0, --rate-hz > 0 and --episode-steps >= 1")
    print(f"bench/churn.py: seed {args.seed}, {args.duration_s:g} s, at most {args.max_robots} robots, "
          f"{args.rate_hz:g} Hz, {args.episode_steps}-step episodes, leave after {args.leave_after_s:g} s; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="bench_churn_"))
    started = time.monotonic()
    try:
        return dry_run(args, workdir) if args.dry_run else run_bench(args, workdir)
    finally:
        print(f"(took {time.monotonic() - started:.0f} s)", flush=True)
        if args.keep:
            print(f"run directory, state and logs kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
