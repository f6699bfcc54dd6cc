"""Run a task's episodes on any robot that carries the task (e.g. `SimFrankaRobot`), in process: the tests of the
scripted experts drive a simulated arm through whole episodes with it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from user.robots.base import ArmState, StepResult
from user.tasks.base import Task, TaskState

Policy = Callable[[ArmState, TaskState], npt.NDArray[np.float32]]


class TaskRobot(Protocol):
    """A robot whose world holds a task's objects."""

    def reset(self, seed: int | None = None) -> ArmState: ...

    def step(self, action: np.ndarray) -> StepResult: ...

    def task_state(self) -> TaskState: ...


@dataclass(frozen=True)
class EpisodeResult:
    """How one episode went."""

    seed: int | None  # reset seed
    success: bool  # the task's success test held at the end
    failed: bool  # the task's failure test ended it
    steps: int  # actions sent
    total_reward: float  # sum of the task's reward after each step
    held_steps: int  # steps in which the robot held instead of acting


def run_episode(
    robot: TaskRobot, task: Task, policy: Policy, seed: int | None, max_steps: int | None = None
) -> EpisodeResult:
    """Reset with `seed`, then act until success, failure or `max_steps` (default: the task's limit)."""
    arm = robot.reset(seed)
    state = robot.task_state()
    limit = task.max_steps if max_steps is None else max_steps
    steps = held = 0
    total = 0.0
    while steps < limit and not task.success(arm, state) and not task.failure(arm, state):
        result = robot.step(policy(arm, state))
        arm, state = result.state, robot.task_state()
        total += task.reward(arm, state)
        steps += 1
        held += int(result.held)
    return EpisodeResult(seed, task.success(arm, state), task.failure(arm, state), steps, total, held)


def evaluate(robot: TaskRobot, task: Task, policy: Policy, seeds: Iterable[int]) -> list[EpisodeResult]:
    """One episode per seed."""
    return [run_episode(robot, task, policy, seed) for seed in seeds]
