"""Fixtures for the simulated-arm tests: fast mode, no cameras unless a test asks for them."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported anywhere in these tests

from collections.abc import Callable, Iterator

import pytest

from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig

NO_CAMERAS = SimCameraConfig(names=())


@pytest.fixture
def make_robot() -> Iterator[Callable[..., SimFrankaRobot]]:
    """Factory of connected simulated robots (fast mode, no cameras by default), closed at teardown."""
    robots: list[SimFrankaRobot] = []

    def make(task: str = "peg_insertion", **overrides: object) -> SimFrankaRobot:
        params: dict[str, object] = {"task": task, "cameras": NO_CAMERAS}
        params.update(overrides)
        robot = SimFrankaRobot(SimRobotConfig(**params))  # type: ignore[arg-type]
        robot.connect()
        robots.append(robot)
        return robot

    yield make
    for robot in robots:
        robot.close()
