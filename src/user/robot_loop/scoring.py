"""Scorers: reward, success and episode end after each step, from a task (sim) or from a gym env."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from user.robots.base import ArmState
from user.robots.gym_robot import GymRobot
from user.tasks.base import Task, TaskState


@dataclass(frozen=True)
class Score:
    reward: float  # reward for the step just taken
    success: bool  # the task is achieved
    terminated: bool  # true end of the MDP (success or failure)
    truncated: bool = False  # the environment itself cut the episode (the loop adds the step limit)


class Scorer(Protocol):
    """What a control loop asks after each step."""

    @property
    def max_steps(self) -> int:
        """Episode length limit in steps."""
        ...

    def score(self, arm: ArmState) -> Score: ...


class TaskScorer:
    """A `Task`'s reward, success and failure, read from the robot's world through `task_state`."""

    def __init__(self, task: Task, task_state: Callable[[], TaskState], max_steps: int | None = None) -> None:
        self.task = task
        self._task_state = task_state
        self._max_steps = max_steps or task.max_steps

    @property
    def max_steps(self) -> int:
        return self._max_steps

    def score(self, arm: ArmState) -> Score:
        state = self._task_state()
        success = self.task.success(arm, state)
        failed = self.task.failure(arm, state)
        return Score(self.task.reward(arm, state), success, success or failed)


class GymScorer:
    """A gymnasium env's own reward and termination; success from `info["is_success"]` when it reports one."""

    def __init__(self, robot: GymRobot, max_steps: int) -> None:
        self._robot = robot
        self._max_steps = max_steps

    @property
    def max_steps(self) -> int:
        return self._max_steps

    def score(self, arm: ArmState) -> Score:
        del arm
        r = self._robot
        success = bool(r.last_info.get("is_success", False))
        return Score(r.last_reward, success, r.last_terminated, r.last_truncated)
