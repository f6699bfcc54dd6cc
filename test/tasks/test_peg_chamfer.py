"""The peg hole's 45-degree bevel, together with the arm's compliance, guides a slightly misaligned peg in.

A "lazy" insertion lines the peg up only to within a few millimetres of the hole and a few hundredths of a
radian of its yaw, then pushes straight down. With the bevel it goes in; with a sharp rim (chamfer 0) the
same motion lands on the rim and stays there. The bevel is what makes the task learnable from demonstrations
and exploration, as on a real fixture; the clearance of the straight part (0.5 mm) is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from test.algorithms import peg
from user.robots.base import ArmState
from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig
from user.tasks import expert
from user.tasks.base import Task, TaskState

pytest.importorskip("mujoco")
OFFSET = np.array([0.003, -0.0015])  # m: where the lazy insertion aims, relative to the hole's centre
YAW_ERROR = 0.04  # rad


def lazy_insertion(task: Task) -> Callable[[ArmState, TaskState], npt.NDArray[np.float32]]:
    def act(arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        tip, hole = np.asarray(state.values["peg_tip"]), np.asarray(state.values["hole_top"])
        quat = expert.yaw_about_z(-expert.square_yaw(state.objects["peg"].pose[3:]) + YAW_ERROR, arm.tcp_pose[3:])
        xy = hole[:2] + OFFSET - tip[:2]
        above = float(np.max(np.abs(xy))) > 0.003 and float(tip[2]) > float(hole[2]) + 0.01
        dz = float(hole[2]) + 0.02 - float(tip[2]) if above else -0.05
        goal = arm.tcp_pose[:3] + np.array([xy[0], xy[1], dz])
        return expert.servo(arm, goal, quat, expert.CLOSE, task.scale, max_speed=0.5)

    return act


def success_rate(chamfer: float) -> float:
    robot = SimFrankaRobot(
        SimRobotConfig(cameras=SimCameraConfig(names=()), safety=peg.SAFETY, task_params={"chamfer": chamfer})
    )
    robot.connect()
    try:
        task = robot.task
        assert task is not None
        act = lazy_insertion(task)
        wins = [
            peg.run(robot, task, lambda obs: act(robot.state(), robot.task_state()), 500 + seed).success
            for seed in range(6)
        ]
        return float(np.mean(wins))
    finally:
        robot.close()


def test_the_bevel_guides_a_misaligned_peg_in_and_a_sharp_rim_does_not() -> None:
    assert success_rate(0.004) >= 5 / 6
    assert success_rate(0.0) <= 1 / 6
