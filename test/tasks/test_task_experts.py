"""Each task's scripted expert succeeds in at least 95% of 40 seeded episodes on the simulated FR3."""

from __future__ import annotations

import logging

import pytest

from test.tasks.runner import evaluate
from user.sim.robot import SimFrankaRobot

SEEDS = range(40)
REQUIRED = 0.95


@pytest.mark.parametrize("task", ["peg_insertion", "pick_place", "button_press"])
def test_expert_success_rate(task: str, robots: dict[str, SimFrankaRobot], caplog: pytest.LogCaptureFixture) -> None:
    robot = robots[task]
    assert robot.task is not None
    with caplog.at_level(logging.ERROR):
        results = evaluate(robot, robot.task, robot.task.scripted_expert, SEEDS)
    wins = sum(r.success for r in results)
    failed = [(r.seed, r.steps, r.failed) for r in results if not r.success]
    assert wins / len(results) >= REQUIRED, (
        f"{task}: {wins}/{len(results)} successes; failures (seed, steps, lost): {failed}"
    )
    assert all(r.held_steps == 0 for r in results)  # the expert's actions are always valid
