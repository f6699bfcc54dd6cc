"""bench/rtc.py (issue 35, item 3): its two deployments check as `user bringup` checks them (a rollout at the cloud
site sending chunks to an arm at the lab site that plays them), the robot's per-episode lines are read into the
figures, and a short run of both modes prints every row (the figures themselves are not checked: the machine is
shared and they are timings)."""

from __future__ import annotations

import pytest

from test.conftest import REPO
from test.helpers.bench_scripts import load, run_bench

pytest.importorskip("transformers", reason="the bench's VLA needs the `vla` extra")

ROWS = ["episodes ended", "steps in them", "periods held for lack of an action", "  per 100 steps", "chunks played"]


@pytest.mark.timeout(120)
def test_dry_run_checks_both_deployments() -> None:
    assert "deployments check" in run_bench_rtc("--dry-run", timeout=110)


def test_the_robot_s_lines_become_the_figures() -> None:
    rtc = load("rtc")
    log = REPO / "test" / "data" / "rtc_robot.log"
    got = rtc.robot_figures(log, "replace")
    assert (got.episodes, got.steps, got.held_after_first, got.held_per_episode) == (2, 80, 9, [4, 5])
    assert (got.chunks_played, got.switches) == (9, 1)


@pytest.mark.slow
@pytest.mark.timeout(300)  # two bringups of a rollout and a camera arm, 25 s each: about 90 s on 2 idle cores
def test_a_quick_run_prints_every_row_for_both_modes() -> None:
    out = run_bench_rtc("--quick", timeout=290)
    for row in ROWS:
        line = next((line for line in out.splitlines() if line.startswith(row)), None)
        assert line is not None and len(line[len(row) :].split()) >= 2, f"missing {row!r} in:\n{out}"


def run_bench_rtc(*args: str, timeout: float) -> str:
    return run_bench("rtc", *args, timeout=timeout)
