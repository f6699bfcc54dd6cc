"""Smoke test of bench/pipeline.py: `--quick` brings up the default deployment async and sync, measures both and
prints every row and target line (the figures themselves are never checked: the machine is shared)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test.conftest import REPO

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
NODES = ["learner", "rollout", "franka_left", "franka_right", "expert_left", "monitor", "router"]


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
