"""The tasks' scripted experts on the simulated ARX L5 (ARX task layout): >= 95% of 40 seeded episodes."""

from __future__ import annotations

import logging

import pytest

from test.tasks.runner import evaluate
from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimArxRobot, arx_config

SEEDS = range(40)
REQUIRED = 0.95


@pytest.mark.parametrize("task", ["button_press", "pick_place"])
def test_expert_success_rate_on_the_arx(task: str, caplog: pytest.LogCaptureFixture) -> None:
    robot = SimArxRobot(arx_config(task, cameras=SimCameraConfig(names=())))
    robot.connect()
    try:
        assert robot.task is not None
        with caplog.at_level(logging.ERROR):
            results = evaluate(robot, robot.task, robot.task.scripted_expert, SEEDS)
    finally:
        robot.close()
    wins = sum(r.success for r in results)
    failed = [(r.seed, r.steps, r.failed) for r in results if not r.success]
    assert wins / len(results) >= REQUIRED, f"{task}: {wins}/{len(results)} successes; failures: {failed}"
    assert all(r.held_steps == 0 for r in results)


def test_default_arx_robot_is_an_l5_button_press_cell() -> None:
    robot = SimArxRobot()
    assert robot.descriptor.model == "arx_l5_sim" and robot.descriptor.dof == 6
    assert robot.task is not None and robot.task.name == "button_press"
