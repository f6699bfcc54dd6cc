"""Rule reward: distance to the target pose, thresholds, terminal mode."""

from __future__ import annotations

import numpy as np
import pytest

from user.config import ConfigError, from_mapping
from user.rewards import RewardError, RewardStep, RuleReward, RuleRewardConfig

DOWN = (1.0, 0.0, 0.0, 0.0)


def step(x: float, quat: tuple[float, ...] = DOWN, last: bool = False) -> RewardStep:
    return RewardStep(0, np.array([x, 0.0, 0.2, *quat, 0, 0, 0, 0, 0, 0, 1], dtype=np.float32), last=last)


def test_dense_reward_falls_with_distance_and_success_needs_the_threshold() -> None:
    reward = RuleReward(RuleRewardConfig(target_position=(0.5, 0.0, 0.2), position_tolerance_m=0.01))
    near, far = reward(step(0.505)), reward(step(0.6))
    assert near.success and not far.success
    assert 1.0 >= near.reward > far.reward > 0.0


def test_orientation_is_scored_when_given() -> None:
    cfg = RuleRewardConfig(target_position=(0.5, 0.0, 0.2), target_orientation=DOWN, rotation_tolerance_rad=0.1)
    tilted = (float(np.cos(0.2)), float(np.sin(0.2)), 0.0, 0.0)  # 0.4 rad away
    reward = RuleReward(cfg)
    assert reward(step(0.5)).success
    assert not reward(step(0.5, tilted)).success
    assert reward.errors(step(0.5, tilted).tcp_pose)[1] == pytest.approx(0.4, abs=1e-5)


def test_sparse_terminal_mode_scores_only_the_last_step() -> None:
    reward = RuleReward(RuleRewardConfig(dense=False, mode="terminal", success_bonus=1.0))
    assert reward(step(0.5)).reward == 0.0
    assert reward(step(0.5, last=True)).reward == 2.0
    assert reward(step(0.7, last=True)).reward == 0.0


def test_config_is_strict_and_validated() -> None:
    with pytest.raises(ConfigError, match="scal"):
        from_mapping(RuleRewardConfig, {"scal": 1.0}, where="")
    with pytest.raises(RewardError):
        RuleRewardConfig(target_orientation=(0.0, 0.0, 0.0, 0.0))
    with pytest.raises(RewardError, match="tool pose"):
        RuleReward()(RewardStep(0, np.zeros(3, dtype=np.float32)))
