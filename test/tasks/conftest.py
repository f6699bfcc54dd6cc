"""Task tests run on the simulated FR3 in fast mode without cameras."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator

import pytest

from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig


@pytest.fixture(scope="module")
def robots() -> Iterator[dict[str, SimFrankaRobot]]:
    """One connected robot per task name, made on first use, shared within a test module."""
    made: dict[str, SimFrankaRobot] = {}

    class Robots(dict[str, SimFrankaRobot]):
        def __missing__(self, task: str) -> SimFrankaRobot:
            robot = SimFrankaRobot(SimRobotConfig(task=task, cameras=SimCameraConfig(names=())))
            robot.connect()
            made[task] = robot
            self[task] = robot
            return robot

    yield Robots()
    for robot in made.values():
        robot.close()
