"""The simulated peg-insertion task as a state-based learning problem (no cameras) for learning tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from test.algorithms.ring import RingBuffer
from user.policies.base import PolicyInput
from user.robots.base import ArmState
from user.robots.sim.cameras import CameraConfig
from user.robots.sim.robot import SimFrankaRobot, SimRobotConfig
from user.tasks.base import Task, TaskState

STATE_DIM = 17  # arm.vector() (14) + tool position relative to the hole top, x50 (3)
ACTION_DIM = 7
Actor = Callable[[PolicyInput], np.ndarray]


def make_robot() -> tuple[SimFrankaRobot, Task]:
    robot = SimFrankaRobot(SimRobotConfig(cameras=CameraConfig(names=())))
    robot.connect()
    assert robot.task is not None
    return robot, robot.task


def observe(arm: ArmState, state: TaskState) -> np.ndarray:
    rel = (arm.tcp_pose[:3] - np.asarray(state.values["hole_top"])) * 50.0
    return np.concatenate([arm.vector(), rel]).astype(np.float32)


@dataclass
class Episode:
    success: bool
    steps: int
    interventions: int


def run(
    robot: SimFrankaRobot,
    task: Task,
    actor: Actor,
    seed: int,
    buffer: RingBuffer | None = None,
    *,
    expert_gate: Callable[[np.ndarray, np.ndarray], bool] | None = None,
    is_demo: bool = False,
    on_step: Callable[[], None] | None = None,
) -> Episode:
    """One episode; the reward is sparse (1 on success, which ends the episode); `expert_gate(robot_action,
    expert_action)` decides per step whether the scripted expert acts instead (an intervention)."""
    arm = robot.reset(seed)
    state = robot.task_state()
    steps = interventions = 0
    success = False
    while steps < task.max_steps and not success:
        obs = observe(arm, state)
        action = np.asarray(actor(PolicyInput(obs)), np.float32)
        intervened = False
        if expert_gate is not None:
            expert = task.scripted_expert(arm, state)
            if expert_gate(action, expert):
                action, intervened = expert, True
                interventions += 1
        result = robot.step(action)
        arm, state = result.state, robot.task_state()
        success = task.success(arm, state)
        if buffer is not None:
            buffer.add(
                obs,
                result.applied,
                float(success),
                observe(arm, state),
                success,
                is_demo=is_demo,
                intervened=intervened,
            )
        steps += 1
        if on_step is not None:
            on_step()
    return Episode(success, steps, interventions)


def expert_actor(robot: SimFrankaRobot, task: Task) -> Actor:
    """The scripted expert as an actor (reads the arm and task state from the robot)."""

    def act(obs: PolicyInput) -> np.ndarray:
        del obs
        return task.scripted_expert(robot.state(), robot.task_state())

    return act
