"""Learned reward: the ResNet-18 success classifier on rendered sim frames (>= 90% on held-out episodes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from test.rewards.simframes import episode_frames
from user.rewards import RewardError, RewardMode, RewardStep
from user.rewards.classifier import ClassifierConfig, LearnedReward, SuccessClassifier, SuccessNet


def test_resnet18_shapes_and_depth() -> None:
    net = SuccessNet(width=4)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size != (1, 1)]
    assert len(convs) == 17  # 1 stem + 16 in the blocks, + the final linear = 18 layers
    assert tuple(net(torch.zeros(2, 3, 32, 32)).shape) == (2,)


@pytest.mark.slow  # ~60 s of CPU training; once crashed inside torch's backward after EGL rendering (unexplained)
def test_classifier_reaches_90_percent_on_held_out_sim_frames(tmp_path: Path) -> None:
    train_x, train_y = episode_frames(range(0, 24))
    test_x, test_y = episode_frames(range(100, 108))
    assert 0.1 < test_y.mean() < 0.9
    clf = SuccessClassifier(ClassifierConfig(camera="front", image_size=64, width=16, epochs=8, seed=0))
    report = clf.fit(train_x, train_y)
    assert report.val_frames > 0
    assert np.mean((clf.probability(test_x) >= 0.5) == test_y) >= 0.9
    clf.save(tmp_path / "reward.pt")
    loaded = SuccessClassifier.load(tmp_path / "reward.pt")
    np.testing.assert_allclose(loaded.probability(test_x[:4]), clf.probability(test_x[:4]), atol=1e-6)
    reward = LearnedReward(loaded, threshold=0.5, mode=RewardMode.STEP)
    state = np.zeros(7, dtype=np.float32)
    values = [reward(RewardStep(0, state, {"front": x})).success for x in test_x]
    assert np.mean(np.asarray(values) == test_y) >= 0.9


def test_learned_reward_modes_and_errors(tmp_path: Path) -> None:
    clf = SuccessClassifier(ClassifierConfig(width=2, image_size=16))
    frame = np.zeros((32, 32, 3), dtype=np.uint8)
    state = np.zeros(7, dtype=np.float32)
    terminal = LearnedReward(clf, threshold=0.0, mode=RewardMode.TERMINAL)
    assert terminal(RewardStep(0, state, {"front": frame})).reward == 0.0
    assert terminal(RewardStep(0, state, {"front": frame}, last=True)).reward == 1.0
    with pytest.raises(RewardError, match="front"):
        terminal(RewardStep(0, state, {"wrist": frame}, last=True))
    with pytest.raises(RewardError, match="both"):
        clf.fit(np.zeros((4, 16, 16, 3), dtype=np.uint8), np.zeros(4, dtype=np.bool_))
    with pytest.raises(RewardError, match="cannot read"):
        SuccessClassifier.load(tmp_path / "missing.pt")
