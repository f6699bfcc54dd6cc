"""bench/fleet.py (issue 36, item 5): its deployments check as `user bringup` checks them, a short run of two
lock-step robots prints every row (the figures themselves are not checked: the machine is shared), and the figures
come out right from what a probe saw."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from test.helpers.bench_scripts import load
from test.helpers.bench_scripts import run_bench as run_bench_script

pytest.importorskip("gymnasium")

ROWS = [
    f"machine load average (mean, {os.cpu_count()} CPUs)",
    "machine CPU busy, % (all processes)",
    "stored transitions / s (learner)",
    "learner CPU s per 1,000 stored",
    "CPU share, learner (1.0 = one core)",
    "CPU share, router (1.0 = one core)",
    "ack latency p99, ms",
    "weight fan-out max, ms",
]


def run_bench(*args: str, timeout: float) -> str:
    return run_bench_script("fleet", *args, timeout=timeout)


@pytest.mark.timeout(120)
def test_dry_run_checks_the_deployment_of_every_size() -> None:
    out = run_bench("--dry-run", "--sizes", "1,4,32", timeout=110)
    for n, nodes in ((1, 3), (4, 6), (32, 34)):
        assert f"[{n} robots] deployment checked: {nodes} nodes" in out, out


@pytest.mark.timeout(240)  # one bringup of a learner, a rollout and two gym robots: about 25 s on 2 idle cores
def test_a_short_run_of_two_robots_prints_every_row() -> None:
    out = run_bench("--sizes", "2", "--window-s", "3", timeout=230)
    header = next(line for line in out.splitlines() if line.startswith("Fleet scale"))
    assert "columns: robots" in header, out
    for row in ROWS:
        line = next((line for line in out.splitlines() if line.startswith(row)), None)
        assert line is not None and len(line[len(row) :].split()) == 1, f"missing {row!r} in:\n{out}"
    assert "WARNING" not in out, out
    assert "scaling efficiency 1 -> 4 robots: n/a (needs sizes 1 and 4)" in out


def test_ack_latency_counts_the_ends_in_the_window_and_those_never_receipted() -> None:
    probe = load("fleet_probe")
    ends = {("a", 1): 10.0, ("a", 2): 20.0, ("b", 1): 21.0, ("b", 2): 99.0}
    acks = {("a", 1): 10.5, ("a", 2): 20.004, ("b", 2): 99.1}
    observed = probe.Observed([], ends, acks, {}, {})
    got, missing = probe.ack_latencies(observed, (15.0, 30.0))  # ("a", 1) before, ("b", 2) after the window
    assert got == pytest.approx([0.004]) and missing == 1  # ("b", 1) never receipted


def test_the_ack_latency_splits_at_each_episodes_done_step() -> None:
    probe = load("fleet_probe")
    ends = {("a", 1): 20.0, ("a", 2): 22.0, ("b", 1): 21.0, ("b", 2): 99.0}
    done = {("a", 1): 20.01, ("a", 2): 21.9, ("b", 2): 99.0}  # ("a", 2)'s done step came before its END
    acks = {("a", 1): 20.3, ("a", 2): 22.05, ("b", 1): 21.2, ("b", 2): 99.1}
    to_done, to_ack = probe.ack_split(probe.Observed([], ends, acks, {}, {}, done), (15.0, 30.0))
    assert to_done == pytest.approx([0.01, -0.1]) and to_ack == pytest.approx([0.29, 0.05])  # ("b", 1): no done


def test_fan_out_is_until_the_last_robot_acts_with_the_version_or_a_newer_one() -> None:
    probe = load("fleet_probe")
    published = {3: 100.0, 4: 110.0, 5: 120.0, 2: 90.0}  # 2 before the window
    acting = {("a", 3): 100.2, ("b", 3): 100.5, ("a", 5): 120.1, ("b", 4): 110.3, ("b", 5): 121.0, ("a", 2): 95.0}
    observed = probe.Observed([], {}, {}, published, acting)
    spans, unreached = probe.fan_outs(observed, ["a", "b"], (95.0, 125.0))
    # 3: a 100.2, b 100.5 -> 0.5; 4: a first acts with 5 at 120.1, b 110.3 -> 10.1; 5: b 121.0 -> 1.0
    assert sorted(spans) == pytest.approx([0.5, 1.0, 10.1]) and unreached == 0
    spans, unreached = probe.fan_outs(observed, ["a", "b", "c"], (95.0, 125.0))
    assert spans == [] and unreached == 3  # c never acted


def test_what_saturates_is_a_node_at_a_full_core_else_the_machine() -> None:
    probe = load("fleet_probe")
    assert probe.saturated({"learner": 0.95, "rollout": 0.5}, 0.7, 2) == "learner (95% of a core)"
    assert probe.saturated({"learner": 0.3, "rollout": 0.5}, 0.93, 2) == "the machine's 2 CPUs (93% busy)"
    assert probe.saturated({"learner": 0.3}, 0.5, 2) == "nothing found saturated"
    assert probe.percentiles_ms([])[3] == 0 and math.isnan(probe.percentiles_ms([])[0])


def test_scaling_efficiency_and_keeping_up_compare_with_one_robot_alone() -> None:
    fleet = load("fleet")

    def point(n: int, rate: float) -> object:
        nan3 = (math.nan, math.nan, math.nan, 0)
        return fleet.Point(n, 60.0, rate, rate, 20.0 * n, 1.0, {}, 0.5, 1.0, nan3, 0, nan3, nan3, nan3, 0, 10.0)

    points = {1: point(1, 20.0), 4: point(4, 70.0), 16: point(16, 300.0)}
    assert fleet.efficiency(points) == pytest.approx(70.0 / 80.0)
    assert fleet.keeps_up(points[4], points[1]) is False  # 17.5 per robot < 0.9 x 20
    assert fleet.keeps_up(points[16], points[1]) is True  # 18.75 per robot
    assert fleet.efficiency({4: points[4]}) is None


def test_the_deployment_has_one_learner_and_one_rollout_for_every_robot(tmp_path: Path) -> None:
    fleet = load("fleet")
    dep = fleet.deployment(3, "tcp/127.0.0.1:1", tmp_path, 20.0, 50)
    kinds = [node["kind"] for node in dep["nodes"]]
    assert kinds == ["learner", "rollout", "robot", "robot", "robot"]
    robots = ["lock_00", "lock_01", "lock_02"]
    assert dep["nodes"][0]["params"]["robots"] == robots and dep["nodes"][1]["params"]["robots"] == robots
    assert dep["nodes"][0]["params"]["pacing"]["publish_every"] == 6  # 60 transitions/s x 0.05 x 2 s
    assert {node["params"]["driver"] for node in dep["nodes"][2:]} == {"gym"}
    assert dep["nodes"][0]["params"]["buffer"]["storage"]["fsync"] == "episode"  # as shipped, unless asked
    never = fleet.deployment(3, "tcp/127.0.0.1:1", tmp_path, 20.0, 50, fsync="never")
    assert never["nodes"][0]["params"]["buffer"]["storage"]["fsync"] == "never"


def test_learner_settings_are_changed_by_dotted_name(tmp_path: Path) -> None:
    fleet = load("fleet")
    dep = fleet.deployment(
        2, "tcp/127.0.0.1:1", tmp_path, 20.0, 50, learner_params=["tensorboard=false", "buffer.storage.fsync=never"]
    )
    learner = dep["nodes"][0]["params"]
    assert learner["tensorboard"] is False and learner["buffer"]["storage"]["fsync"] == "never"
    with pytest.raises(ValueError, match="NAME=VALUE"):
        fleet.set_dotted({}, "tensorboard")
