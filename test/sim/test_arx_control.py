"""Joint PD + IK on the simulated ARX: Cartesian targets are reached, unreachable orientations degrade
gracefully (position kept), the PD loop runs at 200 Hz, and invalid actions do not move the arm.

Tolerance: with gravity compensation and no joint friction the PD loop has no steady-state error in free
space, so after 1.5 s the tool should sit on the IK solution; 1 mm / 0.01 rad leaves room for the IK's
own 0.1 mm / 1e-4 rad stop and is well inside what the tasks need (the button expert aligns to 4 mm).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest

from user.robots.rotations import angle_between, apply_rotvec
from user.sim.arx_sim import ArxSim
from user.sim.cameras import SimCameraConfig
from user.sim.joint_control import JointPdController
from user.sim.robot import SimFrankaRobot, arx_config
from user.tasks.base import TOOL_DOWN

POSITION_TOL = 1e-3  # m
ROTATION_TOL = 0.01  # rad


def _pd(sim: ArxSim) -> JointPdController:
    """The arm's joint PD + IK controller, the one the simulator runs."""
    assert isinstance(sim.controller, JointPdController)
    return sim.controller


@pytest.fixture(scope="module")
def sim() -> ArxSim:
    return ArxSim()


def test_pd_loop_runs_at_200_hz(sim: ArxSim) -> None:
    assert _pd(sim).decimation * sim.model.opt.timestep == pytest.approx(1.0 / 200.0)
    assert sim.period_s == pytest.approx(0.1)


@pytest.mark.parametrize(
    "target",
    [
        [0.3, 0.0, 0.12, *TOOL_DOWN],
        [0.38, -0.1, 0.05, *TOOL_DOWN],
        [0.22, 0.05, 0.1, *apply_rotvec(TOOL_DOWN, [0.2, 0.0, 0.0])],  # tool tilted 0.2 rad about x
    ],
)
def test_ik_and_joint_pd_reach_cartesian_targets(sim: ArxSim, target: list[float]) -> None:
    sim.reset(0)
    goal = np.array(target)
    sim.command(goal, 1.0)
    sim.advance(15)
    state = sim.read_state()
    assert np.linalg.norm(state.tcp_pose[:3] - goal[:3]) < POSITION_TOL
    assert angle_between(state.tcp_pose[3:], goal[3:] / np.linalg.norm(goal[3:])) < ROTATION_TOL


def test_unreachable_orientation_keeps_the_position(sim: ArxSim) -> None:
    """Tool down with fingers along x at +y needs joint6 past its 2 rad limit: position wins."""
    sim.reset(0)
    goal = np.array([0.25, 0.2, 0.06, *TOOL_DOWN])
    sim.command(goal, 1.0)
    sim.advance(20)
    state = sim.read_state()
    ik = _pd(sim).last_ik
    assert ik is not None and ik.position_error < 1e-3 and ik.rotation_error > 0.05
    assert np.linalg.norm(state.tcp_pose[:3] - goal[:3]) < 2 * POSITION_TOL
    assert np.all(state.joint_positions <= np.array(_pd(sim).ik.high) + 0.02)


def test_a_nan_action_does_not_move_the_arm(caplog: pytest.LogCaptureFixture) -> None:
    robot = SimFrankaRobot(arx_config("button_press", cameras=SimCameraConfig(names=())))
    robot.connect()
    try:
        before = robot.reset(3)
        with caplog.at_level(logging.ERROR):
            result = robot.step(np.full(7, np.nan, dtype=np.float32))
        assert result.held
        assert np.linalg.norm(result.state.tcp_pose[:3] - before.tcp_pose[:3]) < 1e-3
        assert robot.descriptor.dof == 6 and robot.descriptor.model == "arx_l5_sim"
    finally:
        robot.close()


def test_wrist_and_front_cameras_render(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("button_press", arm="arx_l5", robot_id="arx", cameras=SimCameraConfig(mode="inline"))
    robot.reset(0)
    robot.step(np.zeros(7, dtype=np.float32))
    frames = robot.frames()
    assert set(frames) == {"wrist", "front"}
    assert all(f.image.std() > 5.0 for f in frames.values())
