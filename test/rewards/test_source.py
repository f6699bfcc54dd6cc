"""Where a reward node's rewards come from (`user.rewards.source`): each source's step reward, the settings of one
source refused under another, and a classifier source without its file refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.config.strict import ConfigError, from_mapping
from user.rewards.rule import RuleReward
from user.rewards.source import RewardSourceConfig


def load(**data: object) -> RewardSourceConfig:
    return from_mapping(RewardSourceConfig, data, where="reward.yaml")


def test_each_source_scores_steps_its_own_way() -> None:
    assert load().step_reward() is None  # task: the robot's own reward
    rule = load(source="rule", rule={"dense": False})
    first, second = rule.step_reward(), rule.step_reward()
    assert isinstance(first, RuleReward) and first is not second  # a fresh one each: rewards keep episode state
    with pytest.raises(ValueError, match="human scores no step on its own"):
        load(source="human").step_reward()


def test_settings_of_another_source_and_a_classifier_without_its_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="latency_s: a setting of source 'human', but source 'task'"):
        load(latency_s=0.5)
    with pytest.raises(ConfigError, match="source classifier needs classifier_path"):
        load(source="classifier")
    with pytest.raises(ConfigError, match="classifier_path '.*missing.pt'"):
        load(source="classifier", classifier_path=str(tmp_path / "missing.pt")).step_reward()
