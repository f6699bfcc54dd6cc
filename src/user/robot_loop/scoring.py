"""Scorers: reward, success and episode end after each step.

From a task (sim), a gym env, a rule on the tool pose (real arms), or nobody (`ExternalScorer`: a reward
node downstream writes the reward, e.g. from the human pedal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from user.rewards.base import RewardMode, RewardStep
from user.rewards.rule import RuleReward
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


class _StepLimited:
    """The episode length limit every scorer reports (`Scorer.max_steps`)."""

    _max_steps: int

    @property
    def max_steps(self) -> int:
        return self._max_steps


class TaskScorer(_StepLimited):
    """A `Task`'s reward, success and failure, read from the robot's world through `task_state`."""

    def __init__(self, task: Task, task_state: Callable[[], TaskState], max_steps: int | None = None) -> None:
        self.task = task
        self._task_state = task_state
        self._max_steps = max_steps or task.max_steps

    def score(self, arm: ArmState) -> Score:
        state = self._task_state()
        success = self.task.success(arm, state)
        failed = self.task.failure(arm, state)
        return Score(self.task.reward(arm, state), success, success or failed)


class GymScorer(_StepLimited):
    """A gymnasium env's own reward and termination; success from `info["is_success"]` when it reports one."""

    def __init__(self, robot: GymRobot, max_steps: int) -> None:
        self._robot = robot
        self._max_steps = max_steps

    def score(self, arm: ArmState) -> Score:
        del arm
        r = self._robot
        success = bool(r.last_info.get("is_success", False))
        return Score(r.last_reward, success, r.last_terminated, r.last_truncated)


class RuleScorer(_StepLimited):
    """`RuleReward` (distance of the tool to a target pose) on the arm's state after each step.

    Success (within the rule's tolerances) ends the episode. Only the rule's step mode fits here: the scorer
    cannot know whether a step is an episode's last before it is scored.
    """

    def __init__(self, reward: RuleReward, max_steps: int) -> None:
        if reward.mode is not RewardMode.STEP:
            raise ValueError("a robot's rule scorer needs rule mode 'step' (terminal mode: use a reward node)")
        self.reward = reward
        self._max_steps = max_steps

    def score(self, arm: ArmState) -> Score:
        value = self.reward(RewardStep(arm.stamp_ns, arm.vector()))
        return Score(value.reward, value.success, value.success)


class ExternalScorer(_StepLimited):
    """Reward 0, never a success, never the end of an episode: the reward comes from downstream.

    For robots whose reward a `reward` node writes into the transitions (the human pedal, a classifier);
    only the step limit ends an episode here (truncated).
    """

    def __init__(self, max_steps: int) -> None:
        self._max_steps = max_steps

    def score(self, arm: ArmState) -> Score:
        del arm
        return Score(0.0, False, False)
