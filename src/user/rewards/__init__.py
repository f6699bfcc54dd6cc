"""Rewards: rule-based (distance to a target pose), human (pedal presses), learned (success classifier)."""

from user.rewards.base import Reward, RewardError, RewardMode, RewardStep, RewardValue
from user.rewards.human import HumanPress, HumanRewardAggregator, HumanStepReward, PressMode, StepWindow
from user.rewards.rule import RuleReward, RuleRewardConfig

__all__ = [
    "HumanPress",
    "HumanRewardAggregator",
    "HumanStepReward",
    "PressMode",
    "Reward",
    "RewardError",
    "RewardMode",
    "RewardStep",
    "RewardValue",
    "RuleReward",
    "RuleRewardConfig",
    "StepWindow",
]
