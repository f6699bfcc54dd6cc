"""Smoke test of bench/learner_gpu.py: `--dry-run` (CPU, tiny sizes) takes every path the GPU run takes, prints
every figure and ends with the JSON summary line (timings are never checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from test.conftest import REPO

BENCH = REPO / "bench" / "learner_gpu.py"
SETUPS = [f"image {k}, {m}" for k in ("SAC", "RLPD") for m in ("naive", "tuned")]


@pytest.mark.timeout(180)
def test_dry_run_prints_every_figure_and_a_json_summary() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--dry-run"], capture_output=True, text=True, timeout=170, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    for setup in SETUPS:
        assert any(line.startswith(setup) for line in lines), f"no {setup!r} row in:\n{proc.stdout}"
    assert "DDP scaling, tuned image RLPD, 2 CPU ranks (gloo, dry run)" in proc.stdout
    summary = json.loads(lines[-1])
    assert set(summary["updates_per_s"]) == set(SETUPS)
    assert set(summary["tuned_over_naive"]) == {"SAC", "RLPD"}
    assert {"none", "get_weights (today)", "flat buffer, side stream"} <= set(summary["publication"])
    assert summary["ddp_scaling"]["ranks"] == 2 and summary["ddp_scaling"]["efficiency"] > 0
    assert summary["dry_run"] is True
    assert "compile_fell_back" not in summary  # the compiled path ran (with the eager backend on the CPU)
