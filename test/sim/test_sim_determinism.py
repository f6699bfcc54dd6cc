"""The same seed and actions give the same episode, bit for bit; another seed gives another start."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from user.sim.robot import SimFrankaRobot


def _rollout(robot: SimFrankaRobot, seed: int, steps: int) -> list[np.ndarray]:
    state = robot.reset(seed)
    trace = []
    for _ in range(steps):
        task_state = robot.task_state()
        assert robot.task is not None
        state = robot.step(robot.task.scripted_expert(state, task_state)).state
        objects = [o.pose for o in task_state.objects.values()]
        trace.append(np.concatenate([state.tcp_pose, state.joint_positions, state.joint_velocities, *objects]))
    return trace


def test_same_seed_same_episode(make_robot: Callable[..., SimFrankaRobot]) -> None:
    a = _rollout(make_robot("pick_place"), seed=11, steps=25)
    b = _rollout(make_robot("pick_place"), seed=11, steps=25)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_same_robot_replays_after_other_episodes(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("peg_insertion")
    first = _rollout(robot, seed=4, steps=10)
    _rollout(robot, seed=5, steps=10)
    again = _rollout(robot, seed=4, steps=10)
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)


def test_different_seeds_start_differently(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("button_press")
    a = robot.reset(1)
    b = robot.reset(2)
    assert np.linalg.norm(a.tcp_pose[:3] - b.tcp_pose[:3]) > 1e-3
