"""bench/churn.py (issue 36): its deployment and a hand-started robot's settings check as `user bringup` checks
them; a quick run of robots joining and leaving at random loses and duplicates nothing and never restarts the
learner; and the accounting (lost, duplicated, incomplete, cut) comes out right from synthetic records."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from test.conftest import REPO

pytest.importorskip("gymnasium")

BENCH = REPO / "bench" / "churn.py"


def run_bench(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=os.environ
    )


@functools.cache
def probe() -> ModuleType:
    """bench/churn_probe.py as a module."""
    spec = importlib.util.spec_from_file_location("bench_churn_probe", BENCH.parent / "churn_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def steps(robot: str, episode: int, n: int, times: int = 1) -> Counter[tuple[str, int, int]]:
    """The buffer's record of one episode of `n` steps, stored `times` times."""
    return Counter({(robot, episode, step): times for step in range(n)})


@pytest.mark.timeout(120)
def test_dry_run_checks_the_deployment_and_the_hand_started_robot() -> None:
    proc = run_bench("--dry-run", timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "deployment checked: 3 nodes (learner, rollout, a hand-started robot)" in proc.stdout, proc.stdout


@pytest.mark.timeout(300)  # a learner, a rollout and up to 3 gym robots under churn: about 65 s on 2 idle cores
def test_a_quick_churn_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "churn.json"
    proc = run_bench("--quick", "--seed", "2", "--json", str(out), timeout=290)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert (figures["lost"], figures["duplicated"], figures["incomplete"]) == (0, 0, 0), proc.stdout[-4000:]
    assert figures["learner_restarted"] == "no" and figures["updates_at_end"] > figures["updates_at_start"]
    assert sum(r["stored"] for r in figures["robots"].values()) > 0 and figures["drained"] is True
    assert "seed 2" in proc.stdout and "RESULT: PASS" in proc.stdout


def test_an_episode_ended_but_not_stored_is_lost_and_one_stored_twice_is_duplicated() -> None:
    ended = {"a": {0: 5, 1: 5, 2: 5}, "b": {0: 4, 1: None}}  # b's 1: known from its spool only
    stored = steps("a", 0, 5) + steps("a", 2, 5, times=2) + steps("b", 0, 4) + steps("b", 1, 3)
    tallies = probe().account(ended, stored, {"a": 4, "b": 2})
    a, b = tallies["a"], tallies["b"]
    assert (a.ended, a.stored, a.lost, a.lost_ids, a.duplicated, a.duplicated_ids) == (3, 2, 1, [1], 1, [2])
    assert a.cut == 1 and a.incomplete == 0  # id 3 handed out, never ended nor stored: cut by a stop, not lost
    assert (b.lost, b.duplicated, b.incomplete, b.cut) == (0, 0, 0, 0)


def test_a_partial_or_partly_doubled_episode_counts_and_a_whole_unseen_one_does_not() -> None:
    stored = steps("a", 0, 4) + steps("a", 1, 5) + Counter({("a", 1, 4): 1}) + steps("a", 2, 3) + steps("a", 3, 5)
    tallies = probe().account({"a": {0: 5, 1: 5, 2: None}}, stored, {"a": 4})
    a = tallies["a"]
    assert a.incomplete == 1  # episode 0: 4 of the 5 steps its END counted
    assert a.duplicated_ids == [1]  # one step stored twice is a second copy
    assert (a.lost, a.cut, a.stored_end_unseen) == (0, 0, 1)  # episode 3 stored whole, its END never seen
    nothing = probe().account({"c": {0: 2}}, Counter(), {"c": 1})["c"]
    assert (nothing.lost, nothing.stored, nothing.lost_ids) == (1, 0, [0])


def test_the_spool_and_the_saved_ids_are_read_as_the_robot_leaves_them(tmp_path: Path) -> None:
    outbox = tmp_path / "arm.outbox"
    outbox.mkdir()
    for name in ("3.mcap", "4.episode", ".5.mcap.tmp", "6.mcap.unreadable"):
        (outbox / name).write_bytes(b"")
    assert probe().spooled(tmp_path, "arm") == {3, 4}  # whole files only
    assert probe().spooled(tmp_path, "other") == set() and probe().handed_out(tmp_path, "arm") == 0
    (tmp_path / "arm.episode.json").write_text('{"robot_id": "arm", "next_episode_id": 7}\n')
    assert probe().handed_out(tmp_path, "arm") == 7
