"""The simulated peg-insertion task as a state-based learning problem (no cameras) for learning tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from test.algorithms.ring import RingBuffer
from user.policies.base import PolicyInput
from user.robots.base import ArmState
from user.robots.safety import SafetyConfig
from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig
from user.tasks.base import TOOL_DOWN, Task, TaskState

STATE_DIM = 17  # what the pipeline observes: arm.vector() (14) + the task's extras (tool_to_hole x50, 3)
ACTION_DIM = 7
Actor = Callable[[PolicyInput], np.ndarray]

# The action restriction a user sets for this task (robot `safety` settings): the peg stays gripped (the
# gripper may not open), the tool stays within 0.05 rad of pointing straight down (yaw to the hole's square
# is 0, so this never blocks the goal; a peg tilted by 0.07 rad or more jams in the 0.5 mm clearance), and
# the tool target stays above z = 0.105 m (the tool is at 0.11 m
# when the peg tip is at the success depth; the floor bounds how far the integrating target can run ahead
# of a tool blocked by the fixture, which otherwise becomes a large unobserved force). Without these, random
# gripper and roll/pitch exploration drops or tips the peg in almost every early episode.
SAFETY = SafetyConfig(
    workspace_min=(0.25, -0.35, 0.105),
    gripper_max=0.0,
    nominal_orientation=tuple(TOOL_DOWN),
    max_orientation_deviation_rad=0.05,
)


def make_robot() -> tuple[SimFrankaRobot, Task]:
    robot = SimFrankaRobot(SimRobotConfig(cameras=SimCameraConfig(names=()), safety=SAFETY))
    robot.connect()
    assert robot.task is not None
    return robot, robot.task


def observe(arm: ArmState, state: TaskState, task: Task) -> np.ndarray:
    """The live pipeline's observation: `arm.vector()` then the task's extras, flattened in key order."""
    extras = task.observation_extras(state)
    parts = [arm.vector(), *(np.ravel(extras[k]) for k in sorted(extras))]
    return np.concatenate(parts).astype(np.float32)


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
    """One episode scored as the pipeline scores it: the task's reward, success ends the episode (terminal);
    `expert_gate(robot_action, expert_action)` decides per step whether the scripted expert acts instead."""
    arm = robot.reset(seed)
    state = robot.task_state()
    steps = interventions = 0
    success = False
    while steps < task.max_steps and not success:
        obs = observe(arm, state, task)
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
                np.clip(action, -1.0, 1.0) if not result.held else result.applied,  # as ControlLoop records
                task.reward(arm, state),
                observe(arm, state, task),
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
