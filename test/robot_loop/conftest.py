"""Fixtures of the robot loop's tests: a connected simulated arm without cameras."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from user.sim import SimCameraConfig, SimFrankaRobot, SimRobotConfig


@pytest.fixture
def robot() -> Iterator[SimFrankaRobot]:
    r = SimFrankaRobot(SimRobotConfig(robot_id="arm", task="button_press", cameras=SimCameraConfig(names=())))
    r.connect()
    yield r
    r.close()
