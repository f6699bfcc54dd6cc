"""Fault table (issue 13): every node kind of a running sim deployment killed (kill -9) and frozen (SIGSTOP for
10 s), one after the other, and what each fault cost. The experts are not among them: the faults start after the
demonstrations, when the experts have finished (exit code 0, not respawned).

The deployment is config/default.yaml on a private router (two simulated FR3 arms at 10 Hz learning peg
insertion with RLPD, scripted demonstrations first), with a `reward` node (source `task`) in front of the learner
for each robot so that kind is covered too. A probe node on the router watches every robot's episode events,
observations, actions and rewarded transitions, and the learner's stats. For each fault:

- detected in: kill -9, until `user bringup` reports the exit; SIGSTOP, until the probe sees the first symptom
  (the robot holds, or the node's own output stops), "-" when nothing visible happened;
- recovered in: from the kill, or from the SIGCONT that ends a freeze, until the node's work is seen again
  (robot: a new step; learner: a stats message; rollout: an action; reward: a rewarded transition;
  monitor/router: the process back, respawned or continued);
- robots held: seconds of held control periods (republished observations) of all robots, from the fault until
  recovery plus a settle time;
- episodes lost / duplicated: episodes the robots completed (END events) whose end fell in this fault's slot and
  that the learner's buffer lacks at the end of the run (after the robots' re-sends), and (robot, episode) ids
  the buffer holds more than once.

Run: MUJOCO_GL=egl python3 bench/faults.py [--kinds robot,learner,...] [--faults kill,stop] [--freeze-s 10]
     [--json PATH] [--keep]            (all kinds, both faults: about 10 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # inherited by the robot processes

import yaml

from bringup import REPO, Bringup, free_port, wait_for
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.interfaces.episode_events import EpisodeKind, episode_event_from_msg
from user.runtime.node import Node

KINDS = ("robot", "learner", "rollout", "reward", "monitor", "router")  # the experts have finished with the demos
FAULTS = ("kill", "stop")
RECOVERY_TIMEOUT_S = 90.0
SETTLE_S = 5.0  # after recovery, before the next fault
GRACE_S = 20.0  # after the last fault: robots re-send what the learner missed (outbox re-send after 5 s)
POLL_S = 0.1


def deployment(endpoint: str, demos: int, learner_cache: int | None = None) -> dict[str, Any]:
    """config/default.yaml on a private router, `demos` scripted episodes per robot, a reward node per robot;
    `learner_cache`: the learner's decoded-transition cache, when not the default."""
    dep: dict[str, Any] = yaml.safe_load((REPO / "config" / "default.yaml").read_text())
    dep["name"] = "bench_faults"
    dep["router"] = {"endpoints": [endpoint], "start": "always"}
    nodes = dep["nodes"]
    robots = [n["params"]["robot_id"] for n in nodes if n["kind"] == "robot"]
    for node in nodes:
        if node["kind"] == "learner":
            node["params"]["transitions_suffix"] = "transitions/rewarded"
            if learner_cache is not None:
                node["params"].setdefault("buffer", {}).setdefault("storage", {})["cache_size"] = learner_cache
        if node["kind"] == "expert":
            node["params"]["until_episode"] = demos
        if node["kind"] == "rollout":
            node["params"]["start_episode"] = demos
        if node["kind"] == "monitor":
            node["params"]["period_s"] = 2.0
    rewards = [{"name": f"reward_{r}", "kind": "reward", "respawn": True, "params": {"robot_id": r}} for r in robots]
    dep["nodes"] = nodes[:2] + rewards + nodes[2:]
    return dep


class Probe(Node):
    """Watches what every node kind does, with the wall time of each sighting."""

    def __init__(self, bus: ZenohBus, robots: list[str]) -> None:
        super().__init__(bus)
        self._lock = threading.Lock()
        self.ends: list[tuple[float, str, int, int]] = []  # (wall s when received, robot, episode, steps) of ENDs
        self.holds: list[float] = []  # wall time of each republished observation (a held period)
        self.last: dict[str, float] = {}  # what -> wall time it was last seen ("step:<robot>", "action", ...)
        self._steps: dict[str, tuple[int, int]] = {}
        for robot in robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
            self.create_subscription(f"/{robot}/observation", "user/msg/Observation", self._on_obs)
            self.create_subscription(f"/{robot}/action", "user/msg/Action", lambda _m: self._seen("action"))
            self.create_subscription(
                f"/{robot}/transitions/rewarded", "user/msg/Transition", lambda _m: self._seen("rewarded")
            )
        self.create_subscription("/learner/stats", "user/msg/TrainingStats", lambda _m: self._seen("stats"))

    def _seen(self, what: str) -> None:
        with self._lock:
            self.last[what] = time.time()

    def _on_event(self, msg: Any) -> None:
        event = episode_event_from_msg(msg)
        if event.kind == EpisodeKind.END and event.steps > 0:
            # received at (wall clock): the event's own stamp is the robot's clock, simulation time for a sim arm
            with self._lock:
                self.ends.append((time.time(), event.robot_id, event.episode_id, event.steps))

    def _on_obs(self, msg: Any) -> None:
        robot, now = str(msg.robot_id), time.time()
        key = (int(msg.episode_id), int(msg.step))
        with self._lock:
            if self._steps.get(robot) == key:
                self.holds.append(now)
            else:
                self._steps[robot] = key
                self.last[f"step:{robot}"] = now

    def seen_since(self, what: str, since: float) -> bool:
        with self._lock:
            return self.last.get(what, 0.0) > since

    def held_between(self, start: float, end: float) -> int:
        with self._lock:
            return sum(start <= t < end for t in self.holds)


@dataclass
class Outcome:
    node: str
    kind: str
    fault: str
    start: float  # wall time of the injection
    detected_s: float | None  # None: nothing visible
    recovered_s: float | None  # None: not within RECOVERY_TIMEOUT_S
    held_s: float = 0.0
    lost: int = 0
    duplicated: int = 0


class FaultRun:
    """One deployment under `user bringup`, a probe on its router, and faults injected one at a time."""

    def __init__(self, workdir: Path, demos: int, freeze_s: float, learner_cache: int | None = None) -> None:
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        self.dep = deployment(endpoint, demos, learner_cache)
        self.robots = [n["params"]["robot_id"] for n in self.dep["nodes"] if n["kind"] == "robot"]
        self.period_s = 0.1
        self.freeze_s = freeze_s
        self.run_dir = workdir / "run"
        config = workdir / "faults.yaml"
        config.write_text(yaml.safe_dump(self.dep, sort_keys=False))
        self.bringup = Bringup(config, self.run_dir, workdir / "bringup.log")
        self.probe: Probe | None = None
        self.endpoint = endpoint

    def start(self, demos: int) -> Probe:
        wait_for(lambda: "started learner" in self.log(), 120.0, self.bringup.alive, "the deployment to start")
        self.probe = Probe(ZenohBus("bench_faults_probe", ZenohSettings(router=[self.endpoint])), self.robots)
        probe = self.probe
        wait_for(
            lambda: sum(e[2] >= demos for e in probe.ends) >= len(self.robots), 600.0, self.bringup.alive,
            "online episodes from every robot",
        )  # fmt: skip
        return probe

    def log(self) -> str:
        return self.bringup.out.read_text(errors="replace")

    def nodes_of(self, kind: str) -> list[str]:
        if kind == "router":
            return ["router"]
        return [n["name"] for n in self.dep["nodes"] if n["kind"] == kind]

    def inject(self, node: str, kind: str, fault: str) -> Outcome:
        assert self.probe is not None
        pid = self.bringup.pids()[node]
        exits_before = self.log().count(f"{node} exited")
        start = time.time()
        outcome = Outcome(node, kind, fault, start, None, None)
        if fault == "kill":
            os.kill(pid, signal.SIGKILL)
            outcome.detected_s = self._until(lambda: self.log().count(f"{node} exited") > exits_before, start)
        else:
            os.kill(pid, signal.SIGSTOP)
            outcome.detected_s = self._until(lambda: self._symptom(node, kind, start), start, self.freeze_s)
            time.sleep(max(0.0, start + self.freeze_s - time.time()))  # the freeze itself: no synchronisation
            os.kill(pid, signal.SIGCONT)
        outcome.recovered_s = self._until(lambda: self._recovered(node, kind, pid, start), start, RECOVERY_TIMEOUT_S)
        settle_end = time.time() + SETTLE_S
        time.sleep(SETTLE_S)  # a pause between faults, not a synchronisation
        outcome.held_s = self.probe.held_between(start, settle_end) * self.period_s
        return outcome

    def _until(self, done: Callable[[], bool], start: float, timeout_s: float = RECOVERY_TIMEOUT_S) -> float | None:
        deadline = start + timeout_s
        while time.time() < deadline:
            if done():
                return time.time() - start
            if not self.bringup.alive():
                return None
            time.sleep(POLL_S)
        return None

    def _symptom(self, node: str, kind: str, start: float) -> bool:
        """What a frozen node shows from outside: its work stops (seen as a gap of a few periods)."""
        assert self.probe is not None
        quiet = time.time() - 5 * self.period_s
        if kind == "robot":
            return not self.probe.seen_since(f"step:{node}", quiet)
        if self.probe.held_between(start, time.time()) > 0:
            return True
        what = {"learner": "stats", "rollout": "action", "reward": "rewarded"}.get(kind)
        return what is not None and time.time() - start > 2.0 and not self.probe.seen_since(what, start + 1.0)

    def _recovered(self, node: str, kind: str, old_pid: int, start: float) -> bool:
        assert self.probe is not None
        what = {"learner": "stats", "rollout": "action", "reward": "rewarded"}.get(kind)
        if kind == "robot":
            what = f"step:{node}"
        pid = self.bringup.pids().get(node)
        if what is not None:
            return pid is not None and self.probe.seen_since(what, max(start + 0.5, time.time() - 1.0))
        return pid is not None and (pid != old_pid or _running(pid))

    def finish(self, outcomes: list[Outcome]) -> tuple[int | None, dict[str, Any]]:
        """Let re-sends arrive, stop the deployment, then attribute lost and duplicated episodes to the faults."""
        assert self.probe is not None
        time.sleep(GRACE_S)  # the robots' outboxes re-send unacknowledged episodes after 5 s
        ends = list(self.probe.ends)
        self.probe.destroy()
        self.probe.bus.close()
        code = self.bringup.stop()
        stored, duplicated = _stored_episodes(self.run_dir / "buffer")
        lost = [(t, r, e) for t, r, e, _ in ends if (r, e) not in stored]
        for k, outcome in enumerate(outcomes):
            end = outcomes[k + 1].start if k + 1 < len(outcomes) else float("inf")
            outcome.lost = sum(outcome.start <= t < end for t, _, _ in lost)
            outcome.duplicated = sum(outcome.start <= stamp < end for stamp in duplicated)
        summary = {"episodes_completed": len(ends), "stored": len(stored), "lost": len(lost),
                   "duplicated": len(duplicated), "exit_code": code}  # fmt: skip
        return code, summary


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("T", "Z", "X")
    except OSError:
        return False


def _stored_episodes(buffer_dir: Path) -> tuple[set[tuple[str, int]], list[float]]:
    """(robot, episode) ids in the buffer, and the wall time of each extra copy of an id stored twice."""
    from user.buffer.index import Index

    index = Index(buffer_dir, read_only=True)
    try:
        rows = index.episodes()
    finally:
        index.close()
    seen: set[tuple[str, int]] = set()
    extra: list[float] = []
    for row in rows:
        key = (row.robot_id, row.episode_id)
        if key in seen:
            extra.append(row.end_wall_ns / 1e9)  # when the second copy arrived at the learner
        seen.add(key)
    return seen, extra


def table(outcomes: list[Outcome], summary: dict[str, Any], freeze_s: float) -> str:
    """The fault table (markdown). A frozen node's recovery counts from its SIGCONT, `freeze_s` after the stop."""

    def secs(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f} s"

    lines = [
        "| node (kind) | fault | detected in | recovered in | robots held | episodes lost | duplicated |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        fault = "kill -9" if o.fault == "kill" else "SIGSTOP"
        recovered = o.recovered_s if o.fault == "kill" or o.recovered_s is None else max(0.0, o.recovered_s - freeze_s)
        lines.append(f"| {o.node} ({o.kind}) | {fault} | {secs(o.detected_s)} | {secs(recovered)} | "
                     f"{o.held_s:.1f} s | {o.lost} | {o.duplicated} |")  # fmt: skip
    lines.append("")
    lines.append(
        f"episodes completed by the robots {summary['episodes_completed']}, stored {summary['stored']}, "
        f"lost {summary['lost']}, duplicated {summary['duplicated']}; bringup exit code {summary['exit_code']}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated node kinds: {', '.join(KINDS)}")
    parser.add_argument("--faults", default=",".join(FAULTS), help="kill, stop")
    parser.add_argument("--freeze-s", type=float, default=10.0, help="how long SIGSTOP holds a node")
    parser.add_argument("--demos", type=int, default=2, help="scripted episodes per robot before online learning")
    parser.add_argument("--json", type=Path, help="also write the outcomes as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the run directory and logs")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    run = FaultRun(workdir, args.demos, args.freeze_s)
    outcomes: list[Outcome] = []
    try:
        run.start(args.demos)
        for kind in args.kinds.split(","):
            for fault in args.faults.split(","):
                outcome = run.inject(run.nodes_of(kind)[0], kind, fault)
                print(f"{outcome.node} {fault}: detected {outcome.detected_s}, recovered {outcome.recovered_s}",
                      flush=True)  # fmt: skip
                outcomes.append(outcome)
        _, summary = run.finish(outcomes)
    finally:
        if run.bringup.alive():
            run.bringup.stop()
    print(table(outcomes, summary, args.freeze_s), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"outcomes": [asdict(o) for o in outcomes], "summary": summary}, indent=1))
    if args.keep:
        print(f"run directory and logs kept in {workdir}", flush=True)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if summary["lost"] == 0 and summary["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
