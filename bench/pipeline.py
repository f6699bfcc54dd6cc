"""Benchmark of the whole learning pipeline (issue 6): asynchronous vs synchronous training on the same robots.

Both runs are the deployment the main job runs (config/default.yaml, or --config): simulated FR3 arms in
real time at 10 Hz on peg insertion from state, scripted demonstrations first, then RLPD online, learner,
rollout, experts and monitor each in its own process under `user bringup` on a private Zenoh router.
The sync run differs in exactly three settings: learner `pacing.mode: sync`, rollout `mode: sync`, robots
`auto_reset: false` (the rollout resets a robot once the learner has trained on its episode and published).
Same robots, seeds, network sizes and update-to-data ratio (`pacing.updates_per_step`). The two runs go one
after the other (async first), each on the same 2 shared cores, so noise does not hit them alike: the
effective ratio actually reached (gradient steps per stored transition) is printed beside the set one.

What is measured, from what each process makes observable, by a probe node in this process on the router:

- Window: from the moment every robot has started its first online (non-demo) episode, for `--minutes`.
  Learner counters (update calls, gradient steps, busy/idle seconds, env steps) are read from the
  checkpoints the probe asks for at both ends (`/learner/checkpoint` service), so they cover the window.
- Episodes/hour: online episode END events in the window; env steps/hour from the learner's counters.
- Robot waiting: per robot, the gaps between an episode's END and the next START (each EpisodeEvent as the
  probe received it, on this machine's wall clock: robots stamp events on their own clock, a simulated arm's
  being simulation time) clipped to the window, plus held ticks (an observation republished with the same
  episode and step: no action in time) times the control period; divided by robots x window. In sync the
  gaps are the training phases; in async they are the sim reset only. The sync run's (collect + train) /
  collect = robot-time / in-episode time.
- Learner idle: 1 - busy / wall over the window for both modes (busy = time inside updates; in sync the rest
  is waiting while robots collect), and the trainer's own idle_s / (busy_s + idle_s) (waiting for the rate
  limiter) beside it.
- Time to 80 % success: rolling success rate of the last 20 online episodes of all robots (END events in
  stamp order); wall seconds from `user bringup` to the first END at which it reaches 0.8, within the run.
- Observation -> action latency: the probe's receive time of each online observation to its receive time of
  the rollout's action for the same robot, episode and step (one process at the robot's site, like the
  robot node: the same host, peer to peer through Zenoh). p50 / p99 / max over the window.
- Resident memory: VmRSS from /proc/<pid>/status of every child `user bringup` started ("started NAME
  (pid N)"), every --sample-s seconds from the window start to the end of the run; first, last, max, and
  the least-squares slope in MiB per 10 min over all samples and over the second half (flat: second-half
  slope <= max(2 MiB, 1 % of its RSS) per 10 min; the learner's decoded-transition cache fills up to its
  20,000-transition default in about 17 minutes of two robots, so only a run of 30 minutes shows it level).
  CPU share of each node over the window from /proc/<pid>/stat.

Targets: robots waiting < 2 % in async; async episodes/hour >= sync (collect + train) / collect x sync
episodes/hour (full overlap; the paper got 1.55x); time to 80 % success <= 0.5x sync's; latency p99 <= 20 ms;
every node's RSS flat (30-minute run: --memory-minutes 30 lengthens the async run; figures other than
memory stay over the first --minutes).

Seeds (`--seeds K`, `--first-seed S`): the pair of runs is repeated for seeds S .. S+K-1; seed s sets the
algorithm's seed (`learning.seed`, learner and rollout) to s and adds s x SEED_STRIDE to every robot's reset seed,
so each seed's async and sync runs see the same episodes. With more than one seed, time to 80 % success is given as
mean +- sd per mode, each seed's own ratio and the ratio of the means (when every seed reached it), from launch (the
target's figure) and from the window's start (the online phase alone; launch and the demonstrations take the same
time in both modes). `--until-success` ends a window as soon as 80 % rolling success is reached (`--minutes` is then
the cap); the other figures then cover that shorter window. `--updates-per-step X` sets the ratio of both modes
(e.g. one the async learner can hold on this machine, so that both modes run at the same ratio reached, with the
learner still the bottleneck). `--json PATH` writes every run's figures.

Run: MUJOCO_GL=egl python3 bench/pipeline.py [--quick] [--minutes N] [--memory-minutes M] [--modes async,sync]
     [--config PATH] [--seeds K] [--first-seed S] [--until-success] [--updates-per-step X] [--json PATH]
     (default: 10 min window per mode, ~25 min in all; --quick ~2-3 min, 2 demos per robot, 30 s windows, no 80 %
     verdict)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # inherited by the robot processes

import numpy as np
import torch
import yaml

from bringup import Bringup, NodeSamples, free_port, wait_for
from user.bus.router import router_reachable
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_from_msg
from user.runtime.node import Node

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "config" / "default.yaml"
WAIT_TARGET = 0.02  # async: fraction of robot time spent waiting, below
LATENCY_TARGET_MS = 20.0  # observation -> action p99, at most
TIME_TO_SUCCESS_TARGET = 0.5  # async time to 80 % success <= this x sync's
SUCCESS_RATE = 0.8
SUCCESS_WINDOW = 20  # rolling success over this many latest online episodes
FLAT_MIB = 2.0  # RSS flat: second-half slope <= max(FLAT_MIB, FLAT_FRACTION x RSS) per 10 min
FLAT_FRACTION = 0.01
SEED_STRIDE = 10_000_000  # seed s adds s x this to each robot's reset seed (the default robots' seeds are 1e5 apart)
SERVICE_TIMEOUT_S = 60.0


# ------------------------------------------------------------------------------------------------ deployment


def apply_seed(nodes: list[dict[str, Any]], seed: int) -> None:
    """Seed `seed` in deployment `nodes`: the algorithm's seed of the learner and rollout, and each robot's reset
    seeds moved by seed x SEED_STRIDE."""
    for node in nodes:
        params = node.setdefault("params", {})
        if node["kind"] in ("learner", "rollout"):  # both read `learning` (the default config shares one mapping)
            params.setdefault("learning", {})["seed"] = seed
        elif node["kind"] == "robot" and params.get("seed", 0) is not None:  # an unseeded robot stays unseeded
            params["seed"] = int(params.get("seed", 0)) + seed * SEED_STRIDE


def deployment(
    config: Path,
    mode: str,
    endpoint: str,
    demos: int | None,
    *,
    seed: int = 0,
    updates_per_step: float | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The deployment of `config` for `mode` and `seed` on a private router; returns it and a summary of its
    settings."""
    dep = yaml.safe_load(config.read_text())
    dep["name"] = f"bench_pipeline_{mode}"
    dep["router"] = {"endpoints": [endpoint], "start": "always"}
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for node in dep["nodes"]:
        by_kind.setdefault(node["kind"], []).append(node)
    (learner,) = by_kind["learner"]
    (rollout,) = by_kind["rollout"]
    robots = by_kind["robot"]
    pacing = learner["params"].setdefault("pacing", {})
    if updates_per_step is not None:
        pacing["updates_per_step"] = updates_per_step
    apply_seed(dep["nodes"], seed)
    if mode == "sync":
        pacing["mode"] = "sync"
        rollout["params"]["mode"] = "sync"
        for robot in robots:
            robot["params"]["auto_reset"] = False
    if demos is not None:
        for expert in by_kind.get("expert", []):
            expert["params"]["until_episode"] = demos
        rollout["params"]["start_episode"] = demos
    rates = {float(r["params"].get("control_rate_hz", 10.0)) for r in robots}
    if len(rates) != 1:
        raise SystemExit(f"{config}: robots with different control rates {sorted(rates)}; the bench needs one")
    summary = {
        "robots": [r["params"]["robot_id"] for r in robots],
        "rate_hz": rates.pop(),
        "realtime": all(r["params"].get("realtime", True) for r in robots),
        "start_episode": int(rollout["params"].get("start_episode", 0)),
        "pacing": dict(pacing),
        "learning": learner["params"].get("learning", {}),
        "seed": seed,
        "robot_seeds": [r["params"].get("seed", 0) for r in robots],
    }
    return dep, summary


# ------------------------------------------------------------------------------------------------ the probe


class Probe(Node):
    """Listens to episode events, observations and actions of every robot; asks the learner for checkpoints."""

    def __init__(self, bus: ZenohBus, robots: list[str], start_episode: int) -> None:
        super().__init__(bus)
        self.start_episode = start_episode
        self.events: list[EpisodeEvent] = []
        self.holds: list[tuple[float, str]] = []  # (wall time, robot) of each republished observation
        self.latencies: list[tuple[float, float, int]] = []  # (wall time, obs -> action seconds, step), online
        self._seen: dict[tuple[str, int, int], float] = {}  # (robot, episode, step) -> monotonic receive
        self._last: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        for robot in robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
            self.create_subscription(f"/{robot}/observation", "user/msg/Observation", self._on_obs)
            self.create_subscription(f"/{robot}/action", "user/msg/Action", self._on_action)

    def _on_event(self, msg: Any) -> None:
        # A robot stamps its events on its own clock (a simulated arm's is simulation time, from 0); every figure
        # here is on this machine's wall clock, so an event is stamped with the time it arrived (a few ms later).
        event = replace(episode_event_from_msg(msg), stamp_ns=time.time_ns())
        with self._lock:
            self.events.append(event)

    def _on_obs(self, msg: Any) -> None:
        now = time.monotonic()
        key = (str(msg.robot_id), int(msg.episode_id), int(msg.step))
        with self._lock:
            if self._last.get(key[0]) == key[1:]:
                self.holds.append((time.time(), key[0]))
                return
            self._last[key[0]] = key[1:]
            if key[1] >= self.start_episode:
                self._seen[key] = now
                if len(self._seen) > 1000:  # unanswered ones (episode ends) do not pile up
                    for old in list(self._seen)[:500]:
                        del self._seen[old]

    def _on_action(self, msg: Any) -> None:
        now = time.monotonic()
        key = (str(msg.robot_id), int(msg.episode_id), int(msg.step))
        with self._lock:
            seen = self._seen.pop(key, None)
            if seen is not None:
                self.latencies.append((time.time(), now - seen, key[2]))

    def online_events(self) -> list[EpisodeEvent]:
        with self._lock:
            return [e for e in self.events if e.episode_id >= self.start_episode]

    def checkpoint(self, learner: str) -> tuple[float, dict[str, Any]]:
        """Ask the learner for a checkpoint now; (wall time of the reply, its trainer + learner counters)."""
        request = self.codec.msg_class("user/srv/Checkpoint_Request")(tag="")
        response = self.call_service(f"/{learner}/checkpoint", "user/srv/Checkpoint", request, SERVICE_TIMEOUT_S)
        stamp = time.time()
        if not response.success:
            raise RuntimeError(f"checkpoint refused: {response.message}")
        payload = torch.load(response.path, weights_only=False)
        return stamp, {**payload["trainer"], **payload["learner"]}


# ------------------------------------------------------------------------------------------------ processes


# ------------------------------------------------------------------------------------------------ one run


@dataclass
class RunResult:
    mode: str
    launched: float  # wall time of `user bringup`
    window: tuple[float, float]  # wall times
    robots: list[str]
    period_s: float
    start_episode: int
    events: list[EpisodeEvent]  # online episodes, the whole run
    holds: list[tuple[float, str]]
    latencies: list[tuple[float, float, int]]
    counters: tuple[dict[str, Any], dict[str, Any]]  # learner at the window's start and end
    nodes: dict[str, NodeSamples]
    load: list[tuple[float, float]]
    run_end: float
    exit_code: int | None


def measure_window(
    probe: Probe, learner: str, bringup: Bringup, end: float, *, until_success: bool
) -> tuple[float, dict[str, Any]]:
    """Wait for the window's `end` (wall time), or with `until_success` for 80 % rolling success if that comes
    first; returns the learner's counters then (as `Probe.checkpoint`)."""

    def over() -> bool:
        return (until_success and success_reached(probe.online_events()) is not None) or time.time() >= end

    wait_for(over, end - time.time() + 5.0, bringup.alive, "the window's end")
    t1, after = probe.checkpoint(learner)
    if t1 < end:
        print(f"[probe] {SUCCESS_RATE:.0%} rolling success reached: the window ends early", flush=True)
    return t1, after


def run_mode(mode: str, args: argparse.Namespace, workdir: Path, seed: int = 0) -> RunResult:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    dep, summary = deployment(
        args.config, mode, endpoint, args.demos, seed=seed, updates_per_step=args.updates_per_step
    )
    name = f"{mode}_seed{seed}"
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(dep, sort_keys=False))
    robots, period = summary["robots"], 1.0 / summary["rate_hz"]
    learner = next(n["name"] for n in dep["nodes"] if n["kind"] == "learner")
    minutes = args.minutes
    memory_minutes = max(minutes, args.memory_minutes or 0.0) if mode == "async" else minutes
    print(
        f"\n[{mode}] seed {seed}: {len(robots)} robots at {summary['rate_hz']:.0f} Hz "
        f"(realtime {summary['realtime']}), "
        f"pacing {summary['pacing']}, online from episode {summary['start_episode']}; "
        f"window {minutes:g} min{f', memory {memory_minutes:g} min' if memory_minutes > minutes else ''}",
        flush=True,
    )
    bringup = Bringup(path, workdir / f"run_{name}", workdir / f"{name}.out")
    bus: ZenohBus | None = None
    probe: Probe | None = None
    try:
        wait_for(lambda: router_reachable([endpoint], 0.5), 60.0, bringup.alive, "the router")
        bus = ZenohBus("bench_probe", ZenohSettings(router=[endpoint]))
        probe = Probe(bus, robots, summary["start_episode"])
        bringup.start_sampling(args.sample_s)
        p = probe

        def all_online() -> bool:
            started = {e.robot_id for e in p.online_events() if e.kind is EpisodeKind.START}
            return started >= set(robots)

        wait_for(all_online, args.startup_s, bringup.alive, "every robot's first online episode")
        t0, before = probe.checkpoint(learner)
        print(f"[{mode}] online after {t0 - bringup.started:.0f} s; measuring {minutes:g} min", flush=True)
        t1, after = measure_window(probe, learner, bringup, t0 + 60.0 * minutes, until_success=args.until_success)
        if memory_minutes > minutes:
            print(f"[{mode}] memory run goes on to {memory_minutes:g} min", flush=True)
            mem_end = t0 + 60.0 * memory_minutes
            wait_for(lambda: time.time() >= mem_end, 60.0 * memory_minutes, bringup.alive, "the memory run's end")
        bringup.sample()
        run_end = time.time()
        events = probe.online_events()
        with probe._lock:
            holds, latencies = list(probe.holds), list(probe.latencies)
    finally:
        if probe is not None:
            probe.destroy()
        if bus is not None:
            bus.close()
        code = bringup.stop_and_report(mode)
    return RunResult(
        mode, bringup.started, (t0, t1), robots, period, summary["start_episode"], events, holds, latencies,
        (before, after), bringup.nodes, bringup.load, run_end, code,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ analysis


@dataclass
class Figures:
    window_s: float
    load: float  # mean 1-minute load average of the machine over the window
    episodes: int
    episodes_per_hour: float
    steps_per_hour: float
    mean_episode_steps: float
    update_calls_per_s: float
    gradient_steps_per_s: float
    effective_utd: float  # gradient steps per stored transition in the window
    robot_wait: float  # fraction of robot time
    gap_s: float
    hold_s: float
    in_episode_s: float
    learner_idle_wall: float  # 1 - busy / wall
    learner_idle_trainer: float  # idle_s / (busy_s + idle_s)
    overlap: float  # (collect + train) / collect
    time_to_success_s: float | None  # from launch
    online_to_success_s: float | None  # from the window's start (every robot online)
    final_success: float
    online_successes: tuple[int, int]
    latency_ms: tuple[float, float, float, int]  # p50, p99, max, n
    latency_later_ms: tuple[float, float, float, int]  # the same without each episode's first step
    late: float  # fraction of steps answered later than half a control period


def robot_time(result: RunResult) -> tuple[float, float, float]:
    """(gap seconds, hold seconds, in-episode seconds) of all robots, clipped to the window."""
    a, b = result.window
    gap = 0.0
    for robot in result.robots:
        marks = sorted(((e.stamp_ns / 1e9, e.kind) for e in result.events if e.robot_id == robot), key=lambda m: m[0])
        ended: float | None = None
        for stamp, kind in marks:
            if kind is EpisodeKind.END:
                ended = stamp
            elif ended is not None:
                gap += max(0.0, min(stamp, b) - max(ended, a))
                ended = None
        if ended is not None:  # still waiting when the window closed
            gap += max(0.0, b - max(ended, a))
    holds = sum(1 for t, _ in result.holds if a <= t <= b) * result.period_s
    total = len(result.robots) * (b - a)
    return gap, holds, total - gap


def success_reached(events: list[EpisodeEvent]) -> float | None:
    """Wall time (s) of the first online END at which the rolling success of the last SUCCESS_WINDOW ENDs of all
    robots (in stamp order) reaches SUCCESS_RATE; None if it never does."""
    ends = sorted((e for e in events if e.kind is EpisodeKind.END), key=lambda e: e.stamp_ns)
    outcomes = [e.success for e in ends]
    for k in range(SUCCESS_WINDOW, len(outcomes) + 1):
        if sum(outcomes[k - SUCCESS_WINDOW : k]) >= SUCCESS_RATE * SUCCESS_WINDOW:
            return ends[k - 1].stamp_ns / 1e9
    return None


def time_to_success(result: RunResult) -> tuple[float | None, float, tuple[int, int]]:
    """(seconds from launch to SUCCESS_RATE rolling success within the window or None, the rolling success of
    the last episodes, (successes, episodes) online)."""
    ends = sorted((e for e in result.events if e.kind is EpisodeKind.END), key=lambda e: e.stamp_ns)
    ends = [e for e in ends if e.stamp_ns / 1e9 <= result.window[1]]
    reached = success_reached(ends)
    outcomes = [e.success for e in ends]
    recent = outcomes[-SUCCESS_WINDOW:]
    final = sum(recent) / len(recent) if recent else float("nan")
    return None if reached is None else reached - result.launched, final, (sum(outcomes), len(outcomes))


def percentiles(seconds: list[float]) -> tuple[float, float, float, int]:
    """p50, p99, max in ms, and the count."""
    if not seconds:
        return math.nan, math.nan, math.nan, 0
    ms = np.asarray(seconds) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), float(ms.max()), ms.size


def analyse(result: RunResult) -> Figures:
    a, b = result.window
    span = b - a
    before, after = result.counters
    ends = [e for e in result.events if e.kind is EpisodeKind.END and a <= e.stamp_ns / 1e9 <= b]
    d = {k: after[k] - before[k] for k in ("update_calls", "gradient_steps", "busy_s", "idle_s", "env_steps")}
    gap, hold, inside = robot_time(result)
    reached, final, successes = time_to_success(result)
    latency = percentiles([s for t, s, _ in result.latencies if a <= t <= b])
    later = percentiles([s for t, s, step in result.latencies if a <= t <= b and step > 0])
    trainer_total = d["busy_s"] + d["idle_s"]
    load = [v for t, v in result.load if a <= t <= b]
    return Figures(
        window_s=span,
        load=float(np.mean(load)) if load else math.nan,
        episodes=len(ends),
        episodes_per_hour=len(ends) * 3600.0 / span,
        steps_per_hour=d["env_steps"] * 3600.0 / span,
        mean_episode_steps=float(np.mean([e.steps for e in ends])) if ends else math.nan,
        update_calls_per_s=d["update_calls"] / span,
        gradient_steps_per_s=d["gradient_steps"] / span,
        effective_utd=d["gradient_steps"] / d["env_steps"] if d["env_steps"] else math.nan,
        robot_wait=(gap + hold) / (len(result.robots) * span),
        gap_s=gap,
        hold_s=hold,
        in_episode_s=inside,
        learner_idle_wall=max(0.0, 1.0 - d["busy_s"] / span),
        learner_idle_trainer=d["idle_s"] / trainer_total if trainer_total > 0 else math.nan,
        overlap=(inside + gap) / inside if inside > 0 else math.nan,
        time_to_success_s=reached,
        online_to_success_s=None if reached is None else reached - (a - result.launched),
        final_success=final,
        online_successes=successes,
        latency_ms=latency,
        latency_later_ms=later,
        late=float(np.mean([s > result.period_s / 2 for t, s, _ in result.latencies if a <= t <= b]))
        if latency[3]
        else math.nan,
    )


def slope_per_10min(samples: list[tuple[float, float]]) -> float:
    if len(samples) < 3 or samples[-1][0] - samples[0][0] <= 0:
        return math.nan
    t = np.asarray([s[0] for s in samples])
    y = np.asarray([s[1] for s in samples])
    return float(np.polyfit(t - t[0], y, 1)[0]) * 600.0


@dataclass
class Memory:
    first: float
    last: float
    peak: float
    slope: float
    late_slope: float
    cpu: float  # share of one core over the window
    respawns: int

    @property
    def flat(self) -> bool:
        return self.late_slope <= max(FLAT_MIB, FLAT_FRACTION * self.last)


def memory(result: RunResult) -> dict[str, Memory]:
    a, b = result.window
    out: dict[str, Memory] = {}
    for name, node in sorted(result.nodes.items()):
        rss = [s for s in node.rss if s[0] >= a]
        if not rss:
            continue
        half = rss[0][0] + (rss[-1][0] - rss[0][0]) / 2.0
        cpu = [s for s in node.cpu if a <= s[0] <= b]
        share = (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0]) if len(cpu) > 1 else math.nan
        out[name] = Memory(
            first=rss[0][1],
            last=rss[-1][1],
            peak=max(v for _, v in rss),
            slope=slope_per_10min(rss),
            late_slope=slope_per_10min([s for s in rss if s[0] >= half]),
            cpu=share,
            respawns=len(node.pids) - 1,
        )
    return out


# ------------------------------------------------------------------------------------------------ report


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT MET")


def fmt_time(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"{seconds:.0f} s"


def report(results: dict[str, RunResult], quick: bool, minutes: float) -> dict[str, Figures]:
    figs = {mode: analyse(r) for mode, r in results.items()}
    report_table(figs)
    for mode, result in results.items():
        report_memory(mode, result)
    report_targets(results, figs, quick, minutes)
    return figs


def report_table(figs: dict[str, Figures]) -> None:
    modes = list(figs)
    print("\nPipeline over the window (per mode):")
    print(f"{'':<44}" + "".join(f"{m:>14}" for m in modes))

    def row(label: str, value: Callable[[Figures], str]) -> None:
        print(f"{label:<44}" + "".join(f"{value(figs[m]):>14}" for m in modes))

    row("window, s", lambda f: f"{f.window_s:.0f}")
    row("machine load average (mean, 2 cores)", lambda f: f"{f.load:.1f}")
    row("online episodes ended", lambda f: f"{f.episodes}")
    row("episodes / hour", lambda f: f"{f.episodes_per_hour:.0f}")
    row("env steps / hour (stored)", lambda f: f"{f.steps_per_hour:.0f}")
    row("mean episode length, steps", lambda f: f"{f.mean_episode_steps:.1f}")
    row("learner update calls / s", lambda f: f"{f.update_calls_per_s:.2f}")
    row("learner gradient steps / s", lambda f: f"{f.gradient_steps_per_s:.2f}")
    row("gradient steps per stored transition", lambda f: f"{f.effective_utd:.2f}")
    row("robots waiting, % of robot time", lambda f: f"{100 * f.robot_wait:.2f}")
    row("  between episodes, s (all robots)", lambda f: f"{f.gap_s:.1f}")
    row("  held ticks, s (all robots)", lambda f: f"{f.hold_s:.1f}")
    row("learner idle, % of wall (1 - busy/wall)", lambda f: f"{100 * f.learner_idle_wall:.1f}")
    row("learner idle, % trainer (idle/(busy+idle))", lambda f: f"{100 * f.learner_idle_trainer:.1f}")
    row("(collect + train) / collect", lambda f: f"{f.overlap:.3f}")
    row("online successes / episodes (whole run)", lambda f: f"{f.online_successes[0]}/{f.online_successes[1]}")
    row(f"success, last {SUCCESS_WINDOW} episodes", lambda f: f"{f.final_success:.2f}")
    row(f"time to {SUCCESS_RATE:.0%} success from launch", lambda f: fmt_time(f.time_to_success_s))
    row(f"time to {SUCCESS_RATE:.0%} success from the window's start", lambda f: fmt_time(f.online_to_success_s))
    row("obs -> action latency p50, ms", lambda f: f"{f.latency_ms[0]:.2f}")
    row("obs -> action latency p99, ms", lambda f: f"{f.latency_ms[1]:.2f}")
    row("obs -> action latency max, ms", lambda f: f"{f.latency_ms[2]:.2f}")
    row("  steps measured", lambda f: f"{f.latency_ms[3]}")
    row("  p99 without each episode's first step", lambda f: f"{f.latency_later_ms[1]:.2f}")
    row("  over 50 ms (half a period: the robot holds)", lambda f: f"{f.late:.2%}")


def report_memory(mode: str, result: RunResult) -> None:
    mem = memory(result)
    span = (result.run_end - result.window[0]) / 60.0
    print(f"\n[{mode}] resident memory per node over {span:.1f} min (MiB; slope per 10 min), CPU over the window")
    print(f"{'node':<16} {'first':>8} {'last':>8} {'max':>8} {'slope':>8} {'2nd half':>9} {'flat':>5} {'CPU':>6}")
    for name, m in mem.items():
        note = f"  ({m.respawns} respawns)" if m.respawns else ""
        print(
            f"{name:<16} {m.first:>8.1f} {m.last:>8.1f} {m.peak:>8.1f} {m.slope:>+8.2f} {m.late_slope:>+9.2f} "
            f"{'yes' if m.flat else 'no':>5} {100 * m.cpu:>5.0f}%{note}"
        )


def report_targets(results: dict[str, RunResult], figs: dict[str, Figures], quick: bool, minutes: float) -> None:
    print("\nTargets:")
    if "async" in figs:
        f = figs["async"]
        wait = f.robot_wait
        print(f"  robots waiting in async < {WAIT_TARGET:.0%}: {100 * wait:.2f} %: {verdict(wait < WAIT_TARGET)}")
        p99 = f.latency_ms[1]
        print(
            f"  obs -> action p99 <= {LATENCY_TARGET_MS:.0f} ms (async): {p99:.2f} ms: "
            f"{verdict(p99 <= LATENCY_TARGET_MS)}"
        )
    if "async" in figs and "sync" in figs:
        fa, fs = figs["async"], figs["sync"]
        ratio = fa.episodes_per_hour / fs.episodes_per_hour if fs.episodes_per_hour else math.nan
        steps = fa.steps_per_hour / fs.steps_per_hour if fs.steps_per_hour else math.nan
        print(
            f"  episodes/hour async / sync >= sync (collect + train) / collect: {ratio:.2f}x vs {fs.overlap:.2f}x "
            f"(env steps/hour {steps:.2f}x; the paper: 1.55x): {verdict(ratio >= fs.overlap)}"
        )
        ta, ts = fa.time_to_success_s, fs.time_to_success_s
        if quick:
            print("  time to 80 % success <= 0.5x sync: n/a (--quick)")
        elif ta is None:
            print(f"  time to 80 % success <= 0.5x sync: async {fmt_time(ta)}, sync {fmt_time(ts)} "
                  f"within {minutes:g} min windows: NOT MET")  # fmt: skip
        elif ts is None:
            print(f"  time to 80 % success <= 0.5x sync: async {ta:.0f} s, sync not reached within {minutes:g} min: "
                  "met if sync would need >= 2x; undecided")  # fmt: skip
        else:
            print(f"  time to 80 % success <= 0.5x sync: {ta / ts:.2f}x ({ta:.0f} s vs {ts:.0f} s): "
                  f"{verdict(ta <= TIME_TO_SUCCESS_TARGET * ts)}")  # fmt: skip
    for mode, result in results.items():
        mem = memory(result)
        span = (result.run_end - result.window[0]) / 60.0
        flat = [n for n, m in mem.items() if m.flat]
        print(
            f"  resident memory flat ({mode}, {span:.1f} min, 30 min asked): {len(flat)}/{len(mem)} nodes flat: "
            f"{verdict(len(flat) == len(mem)) if span >= 29.5 else 'n/a (shorter than 30 min)'}"
        )


def mean_sd(values: list[float]) -> str:
    """`mean +- sd` (sample sd) of `values`."""
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return f"{np.mean(values):.0f} +- {sd:.0f} s"


def seed_ratios(per_seed: dict[int, dict[str, Figures]], field: str) -> tuple[dict[str, list[float]], list[float]]:
    """Per mode, the seeds' `field` (a time to success; None where not reached, left out), and the per-seed ratios
    async / sync of the seeds where both reached it."""
    times: dict[str, list[float]] = {"async": [], "sync": []}
    ratios: list[float] = []
    for figs in per_seed.values():
        got = {mode: getattr(figs[mode], field) for mode in times}
        for mode, value in got.items():
            if value is not None:
                times[mode].append(value)
        if got["async"] is not None and got["sync"] is not None:
            ratios.append(got["async"] / got["sync"])
    return times, ratios


def report_seeds(per_seed: dict[int, dict[str, Figures]], minutes: float) -> bool | None:
    """Time to 80 % success over the seeds, async against sync; the target's verdict (None: undecided)."""
    seeds = len(per_seed)
    print(f"\nOver {seeds} seeds ({', '.join(str(s) for s in per_seed)}):")
    for mode in ("async", "sync"):
        utd = [figs[mode].effective_utd for figs in per_seed.values()]
        print(f"  {mode}: gradient steps per stored transition {', '.join(f'{u:.2f}' for u in utd)}")
    verdict_of: bool | None = None
    for field, label in (("time_to_success_s", "from launch"), ("online_to_success_s", "from the window's start")):
        times, ratios = seed_ratios(per_seed, field)
        missing = {mode: seeds - len(values) for mode, values in times.items()}
        line = f"  time to {SUCCESS_RATE:.0%} success {label}: " + "; ".join(
            f"{mode} {mean_sd(values) if values else 'n/a'}"
            + (f" ({missing[mode]} seed(s) not within {minutes:g} min)" if missing[mode] else "")
            for mode, values in times.items()
        )
        print(line)
        if ratios:
            complete = not missing["async"] and not missing["sync"]  # else the means are over different seeds
            of_means = f"{np.mean(times['async']) / np.mean(times['sync']):.2f}x" if complete else "n/a"
            print(f"    async / sync per seed: {', '.join(f'{r:.2f}x' for r in ratios)}; ratio of the means {of_means}")
        if field == "time_to_success_s":
            if missing["async"] == 0 and missing["sync"] == 0:
                verdict_of = bool(np.mean(times["async"]) <= TIME_TO_SUCCESS_TARGET * np.mean(times["sync"]))
            elif missing["async"]:
                verdict_of = False
    print(
        f"  time to 80 % success <= 0.5x sync over {seeds} seeds (ratio of the mean times from launch): "
        f"{verdict(verdict_of) if verdict_of is not None else 'undecided (sync not reached in every seed)'}"
    )
    return verdict_of


def write_json(path: Path, per_seed: dict[int, dict[str, Figures]]) -> None:
    rows = [{"seed": seed, "mode": mode, **asdict(f)} for seed, figs in per_seed.items() for mode, f in figs.items()]
    path.write_text(json.dumps(rows, indent=1))


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 demos per robot, 0.5 min windows")
    parser.add_argument("--minutes", type=float, default=None, help="measured window per mode (default 10)")
    parser.add_argument("--memory-minutes", type=float, default=None, help="async run length for the RSS check")
    parser.add_argument("--modes", default="async,sync", help="comma-separated: async, sync")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="deployment YAML")
    parser.add_argument("--demos", type=int, default=None, help="demo episodes per robot (default: the config's)")
    parser.add_argument("--sample-s", type=float, default=None, help="RSS sampling period (default 5 s, quick 2 s)")
    parser.add_argument("--startup-s", type=float, default=900.0, help="longest wait for the online phase")
    parser.add_argument("--keep", action="store_true", help="keep the run directories and logs")
    parser.add_argument("--seeds", type=int, default=1, help="run each mode with this many seeds (default 1)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument(
        "--until-success", action="store_true", help="end a window once 80 %% rolling success is reached"
    )
    parser.add_argument(
        "--updates-per-step",
        type=float,
        default=None,
        help="the learner's pacing.updates_per_step in both modes (default: the config's)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures to this file")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds: at least 1")
    args.minutes = args.minutes or (0.5 if args.quick else 10.0)
    args.sample_s = args.sample_s or (2.0 if args.quick else 5.0)
    if args.quick and args.demos is None:
        args.demos = 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("async", "sync") for m in modes):
        parser.error("--modes: async, sync or both")
    started = time.monotonic()
    load = os.getloadavg()[0]
    print(
        f"bench/pipeline.py: Python {sys.version.split()[0]}, torch {torch.__version__}, {os.cpu_count()} CPUs, "
        f"MUJOCO_GL={os.environ['MUJOCO_GL']}; deployment {args.config}; load average at start {load:.2f} "
        "(other processes share these CPUs)",
        flush=True,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    per_seed: dict[int, dict[str, Figures]] = {}
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            results = {mode: run_mode(mode, args, workdir, seed) for mode in modes}
            if args.seeds > 1:
                print(f"\n===== seed {seed} =====")
            per_seed[seed] = report(results, args.quick, args.minutes)
            if args.json is not None:
                write_json(args.json, per_seed)
        if args.seeds > 1 and set(modes) == {"async", "sync"} and not args.quick:
            report_seeds(per_seed, args.minutes)
    finally:
        if args.keep:
            print(f"\nrun directories and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(took {time.monotonic() - started:.0f} s; load average at the end {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
