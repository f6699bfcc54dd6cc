"""Smoke test of bench/pipeline.py: `--quick` brings up the default deployment async and sync, measures both and
prints every row and target line (the figures themselves are never checked: the machine is shared)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from test.conftest import REPO
from test.helpers.bench_scripts import load
from test.sync.loopback import Loopback
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg

pytest.importorskip("mujoco")

BENCH = REPO / "bench" / "pipeline.py"
ROWS = [
    "episodes / hour",
    "learner update calls / s",
    "robots waiting, % of robot time",
    "learner idle, % of wall (1 - busy/wall)",
    "(collect + train) / collect",
    "time to 80% success from launch",
    "obs -> action latency p99, ms",
]
TARGETS = [
    "robots waiting in async < 2%",
    "obs -> action p99 <= 20 ms",
    "episodes/hour async / sync >= sync (collect + train) / collect",
    "time to 80 % success <= 0.5x sync: n/a (--quick)",
    "resident memory flat (async",
    "resident memory flat (sync",
]
# the experts finish after their demonstrations, before the measured window: they have no row
NODES = ["learner", "rollout", "franka_left", "franka_right", "monitor", "router"]


@pytest.mark.slow  # about 2 min on 2 idle cores (two bringups of the whole deployment, 30 s windows), more when shared
@pytest.mark.timeout(900)
def test_quick_run_prints_every_row() -> None:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=880, cwd=REPO, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    header = next(line for line in out.splitlines() if line.strip().startswith("async"))
    assert header.split() == ["async", "sync"], out
    for row in ROWS:
        line = next((line for line in out.splitlines() if line.startswith(row)), None)
        assert line is not None and len(line[len(row) :].split()) >= 2, f"missing {row!r} in:\n{out}"
    for target in TARGETS:
        assert target in out, f"missing {target!r} in:\n{out}"
    for mode in ("async", "sync"):
        section = out.split(f"[{mode}] resident memory per node")[1].split("\n\n")[0]
        assert all(f"\n{node} " in section for node in NODES), section


def load_bench() -> ModuleType:
    """bench/pipeline.py as a module."""
    return load("pipeline")


def end_event(robot: str, episode: int, stamp_s: float, success: bool) -> EpisodeEvent:
    return EpisodeEvent(robot, "peg_insertion", episode, EpisodeKind.END, int(stamp_s * 1e9), success=success)


def test_seed_sets_the_algorithm_seed_and_moves_every_robots_reset_seeds() -> None:
    bench = load_bench()
    dep, summary = bench.deployment(bench.DEFAULT_CONFIG, "sync", "tcp/127.0.0.1:1", None, seed=2)
    by_name = {n["name"]: n for n in dep["nodes"]}
    assert by_name["learner"]["params"]["learning"]["seed"] == 2
    assert by_name["rollout"]["params"]["learning"]["seed"] == 2
    stride = bench.SEED_STRIDE
    assert [by_name[r]["params"]["seed"] for r in ("franka_left", "franka_right")] == [2 * stride, 100000 + 2 * stride]
    assert summary["robot_seeds"] == [2 * stride, 100000 + 2 * stride] and summary["seed"] == 2
    same, _ = bench.deployment(bench.DEFAULT_CONFIG, "async", "tcp/127.0.0.1:1", None, seed=2)
    assert [n["params"].get("seed") for n in same["nodes"]] == [n["params"].get("seed") for n in dep["nodes"]]
    assert summary["pacing"]["updates_per_step"] == 4.0  # the config's
    _, held = bench.deployment(bench.DEFAULT_CONFIG, "sync", "tcp/127.0.0.1:1", None, seed=2, updates_per_step=3.0)
    assert held["pacing"]["updates_per_step"] == 3.0 and held["pacing"]["mode"] == "sync"
    base, _ = bench.deployment(bench.DEFAULT_CONFIG, "async", "tcp/127.0.0.1:1", None, seed=0)
    assert {n["name"]: n["params"].get("seed") for n in base["nodes"] if n["kind"] == "robot"} == {
        "franka_left": 0,
        "franka_right": 100000,
    }


def test_success_is_reached_at_the_first_end_with_16_of_the_last_20() -> None:
    bench = load_bench()
    events = [end_event("a" if k % 2 else "b", k, 100.0 + k, k >= 4) for k in range(30)]
    # ENDs 0-3 fail; the 20 ENDs 0..19 hold 16 successes: reached at END 19 (stamp 119)
    assert bench.success_reached(list(reversed(events))) == pytest.approx(119.0)
    assert bench.success_reached(events[:19]) is None
    assert bench.success_reached([end_event("a", k, k, k % 2 == 0) for k in range(40)]) is None


def test_seeds_are_summarised_per_mode_with_each_seeds_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench()

    def figs(launch: float | None, online: float | None, utd: float) -> Any:
        return SimpleNamespace(time_to_success_s=launch, online_to_success_s=online, effective_utd=utd)

    per_seed = {
        0: {"async": figs(300.0, 100.0, 3.2), "sync": figs(400.0, 200.0, 4.0)},
        1: {"async": figs(200.0, 50.0, 3.1), "sync": figs(500.0, 300.0, 4.0)},
    }
    assert bench.report_seeds(per_seed, 8.0) is False  # 250 s vs 450 s: 0.56x
    out = capsys.readouterr().out
    assert "async 250 +- 71 s; sync 450 +- 71 s" in out
    assert "async / sync per seed: 0.75x, 0.40x; ratio of the means 0.56x" in out
    assert "async 75 +- 35 s; sync 250 +- 71 s" in out  # from the window's start
    assert "async: gradient steps per stored transition 3.20, 3.10" in out
    per_seed[1]["async"] = figs(100.0, 20.0, 3.1)
    assert bench.report_seeds(per_seed, 8.0) is True  # 200 s vs 450 s: 0.44x
    per_seed[1]["sync"] = figs(None, None, 4.0)
    assert bench.report_seeds(per_seed, 8.0) is None  # sync not reached in one seed: undecided
    out = capsys.readouterr().out
    assert "sync 400 +- 0 s (1 seed(s) not within 8 min)" in out
    assert "async / sync per seed: 0.75x; ratio of the means n/a" in out  # seed 0 alone; the means mix seeds
    per_seed[1]["async"] = figs(None, None, 3.1)
    assert bench.report_seeds(per_seed, 8.0) is False  # async not reached in a seed: missed


def test_the_probe_times_episode_events_by_arrival_not_by_the_robots_clock() -> None:
    """A simulated arm stamps its events in simulation time (seconds from 0); the window, gaps and time to success
    are wall times, so an event counts when it arrived."""
    bench = load_bench()
    net = Loopback()
    probe = bench.Probe(net.bus("probe"), ["franka_left"], 10)
    robot = net.bus("franka_left")
    codec = probe.codec
    pub = robot.create_publisher("/franka_left/episode_events", "user/msg/EpisodeEvent")
    sim_stamp = 12_500_000_000  # 12.5 s of simulation time
    before = time.time_ns()
    pub.publish(codec.encode(episode_event_to_msg(end_event("franka_left", 11, sim_stamp / 1e9, True), codec)))
    after = time.time_ns()
    (event,) = probe.online_events()
    assert before <= event.stamp_ns <= after
    assert (event.robot_id, event.episode_id, event.kind, event.success) == ("franka_left", 11, EpisodeKind.END, True)
    probe.destroy()
