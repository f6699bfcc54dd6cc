"""Faults thrown at a running sim deployment (bench/faults.py): a node killed (kill -9) or frozen (SIGSTOP) is
noticed, recovers, and no episode a robot completed is lost or stored twice.

The default run kills a robot and the learner (about three minutes); the slow run covers every node kind with
both faults and is what the fault table in BENCHMARKS.md comes from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "faults.py"


def run_faults(tmp_path: Path, *args: str, timeout_s: float) -> dict[str, Any]:
    out = tmp_path / "faults.json"
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
        env=env,
    )
    assert out.exists(), f"bench/faults.py wrote no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(out.read_text())
    result["stdout"] = proc.stdout
    return result


def check(result: dict[str, Any]) -> None:
    summary, outcomes = result["summary"], result["outcomes"]
    assert summary["episodes_completed"] > 0, result["stdout"]
    for o in outcomes:
        assert o["recovered_s"] is not None, f"{o['node']} did not recover from {o['fault']}:\n{result['stdout']}"
        if o["fault"] == "kill":
            assert o["detected_s"] is not None, f"{o['node']}'s death went unnoticed:\n{result['stdout']}"
    assert summary["lost"] == 0 and summary["duplicated"] == 0, result["stdout"]


@pytest.mark.timeout(600)
def test_a_killed_robot_and_a_killed_learner_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    check(run_faults(tmp_path, "--kinds", "robot,learner", "--faults", "kill", timeout_s=560))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_node_kind_killed_and_frozen(tmp_path: Path) -> None:
    check(run_faults(tmp_path, timeout_s=1750))
