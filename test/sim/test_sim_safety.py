"""Safety proven on the simulated arm: bad actions, targets outside the workspace and the e-stop leave it still."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from user.robots.safety import SafetyConfig
from user.sim.robot import SimFrankaRobot

STILL_M = 1e-3  # TCP displacement that counts as "did not move"
STEPS = 5


def _displacement(robot: SimFrankaRobot, action: np.ndarray, steps: int = STEPS) -> tuple[float, float]:
    """Largest TCP displacement from the pose before, and gripper change, over `steps` steps of `action`."""
    before = robot.state()
    moved = 0.0
    for _ in range(steps):
        state = robot.step(action).state
        moved = max(moved, float(np.linalg.norm(state.tcp_pose[:3] - before.tcp_pose[:3])))
    return moved, abs(state.gripper - before.gripper)


def test_nan_action_holds_the_arm(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("pick_place")
    robot.reset(3)
    action = np.array([1.0, np.nan, 0.0, 0.0, 0.0, 0.0, -1.0], dtype=np.float32)
    result = robot.step(action)
    assert result.held and any("non-finite" in r for r in result.reasons)
    moved, gripper = _displacement(robot, action)
    assert moved < STILL_M and gripper < 0.01


def test_wrong_shape_or_type_holds_the_arm(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("pick_place")
    robot.reset(3)
    assert robot.step(np.ones(3, dtype=np.float32)).held
    assert robot.step(np.ones(7, dtype=np.int64)).held
    moved, _ = _displacement(robot, np.ones(3, dtype=np.float32))
    assert moved < STILL_M


def test_target_outside_the_workspace_does_not_move_the_arm(make_robot: Callable[..., SimFrankaRobot]) -> None:
    probe = make_robot("button_press")
    start = probe.reset(7).tcp_pose[:3]
    # A workspace whose far corner is the start pose: every push outward is clipped to where the arm is.
    box = SafetyConfig(workspace_min=tuple(start - 0.2), workspace_max=tuple(start + 1e-4))
    robot = make_robot("button_press", safety=box)
    robot.reset(7)
    outward = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, -1.0], dtype=np.float32)
    result = robot.step(outward)
    assert result.clipped and any("outside the workspace" in r for r in result.reasons)
    moved, _ = _displacement(robot, outward)
    assert moved < STILL_M
    target = robot.target_pose
    assert target is not None and np.all(target[:3] <= start + 1e-4 + 1e-9)


def test_estop_holds_the_arm_until_cleared(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("pick_place")
    robot.reset(1)
    robot.estop("operator pressed the button")
    push = np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.5, -1.0], dtype=np.float32)
    result = robot.step(push)
    assert result.held and any("e-stop" in r for r in result.reasons)
    moved, gripper = _displacement(robot, push)
    assert moved < STILL_M and gripper < 0.01
    robot.clear_estop()
    moved, _ = _displacement(robot, push, steps=3)
    assert moved > 0.02  # it moves again once cleared


def test_hold_keeps_the_pose(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("peg_insertion")
    before = robot.reset(2)
    for _ in range(STEPS):
        result = robot.hold("watchdog: no fresh action")
    assert result.held
    assert np.linalg.norm(result.state.tcp_pose[:3] - before.tcp_pose[:3]) < STILL_M
