"""Where a reward node's rewards come from (`source`), declared once: the `reward` node's settings extend
`RewardSourceConfig` (`user.nodes.reward.RewardNodeParams`), so each of these is a parameter of the same name.

- `human`: pedal/keyboard presses, held `latency_s` for late ones (`user.rewards.online.HumanRewarder`);
- `rule`: `RuleReward` (distance of the tool to a target pose) on the next observation;
- `classifier`: `LearnedReward` (the success classifier file at `classifier_path`) on the next observation;
- `task`: the robot's own reward, unchanged.

`step_reward` builds the reward that scores each step of the last three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from user.config.strict import ConfigError, setting
from user.rewards.base import Reward, RewardError, RewardMode
from user.rewards.rule import RuleReward, RuleRewardConfig


@dataclass(frozen=True)
class RewardSourceConfig:
    """The source of the rewards and its settings."""

    source: Literal["human", "rule", "classifier", "task"] = setting(
        "task", "human: pedal presses; rule: distance to a target pose; classifier: learned; task: the robot's"
    )
    latency_s: float = setting(
        0.2,
        "source human: how long a transition waits for late presses after it arrived, s",
        min=0.0,
        max=10.0,
        when=("source", "human"),
    )
    rule: RuleRewardConfig = setting(
        RuleRewardConfig(), "source rule: the rule reward (target pose, tolerances, mode)", when=("source", "rule")
    )
    classifier_path: str = setting(
        "", "source classifier: local file written by `user train-reward`", when=("source", "classifier")
    )
    classifier_threshold: float = setting(
        0.5,
        "source classifier: success when the probability is at least this",
        min=0.0,
        max=1.0,
        when=("source", "classifier"),
    )
    classifier_mode: Literal["step", "terminal"] = setting(
        "step",
        "source classifier: step scores every step; terminal only an episode's last step",
        when=("source", "classifier"),
    )

    def __post_init__(self) -> None:
        if self.source == "classifier" and not self.classifier_path:
            raise ConfigError("source classifier needs classifier_path (a file written by `user train-reward`)")

    def step_reward(self) -> Reward | None:
        """A fresh reward scoring each step on its own (None: the robot's own, source `task`); source `human` has
        none (its rewarder holds transitions for the presses)."""
        if self.source == "human":
            raise ValueError("source human scores no step on its own (see user.rewards.online.HumanRewarder)")
        return _STEP_REWARDS[self.source](self)


def _classifier_reward(c: RewardSourceConfig) -> Reward:
    from user.rewards.classifier import LearnedReward, SuccessClassifier  # torch: only when needed

    try:
        classifier = SuccessClassifier.load(c.classifier_path)
    except (RewardError, ConfigError) as exc:
        raise ConfigError(f"classifier_path {c.classifier_path!r}: {exc}") from exc
    return LearnedReward(classifier, c.classifier_threshold, RewardMode(c.classifier_mode))


# source -> the reward that scores each step (None: the robot's own)
_STEP_REWARDS: dict[str, Callable[[RewardSourceConfig], Reward | None]] = {
    "rule": lambda c: RuleReward(c.rule),
    "classifier": _classifier_reward,
    "task": lambda _c: None,
}
