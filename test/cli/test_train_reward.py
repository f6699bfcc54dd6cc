"""`user train-reward BUFFER --out FILE` end to end: a buffer whose successful episodes end on bright frames
and whose failures stay dark; the command labels its frames, trains the classifier, writes it; the file loads
as a LearnedReward that tells the two apart on new frames. (Accuracy on rendered sim frames is the slow test
in test/rewards/test_learned.py.)"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import pytest

from test.buffer import factories as f
from test.conftest import user_cmd
from user.buffer.replay import ReplayBuffer
from user.interfaces.domain import EncodedImage
from user.interfaces.images import encode_jpeg
from user.rewards import RewardMode, RewardStep
from user.rewards.classifier import LearnedReward, SuccessClassifier


def _frame(bright: bool, rng: np.random.Generator) -> np.ndarray:
    base = 200 if bright else 40
    return np.clip(base + rng.integers(-30, 30, (32, 32, 3)), 0, 255).astype(np.uint8)


def _buffer(path: Path, episodes: int) -> None:
    rng = np.random.default_rng(0)
    with ReplayBuffer.open(path) as buf:
        for e in range(episodes):
            success = e % 2 == 0
            steps = f.episode("r", e, steps=8, images=False, success=success)
            for k, t in enumerate(steps):
                bright = success and k == len(steps) - 1
                image = EncodedImage("front", "jpeg", encode_jpeg(_frame(bright, rng), 90), t.stamp_ns)
                nxt = dataclasses.replace(t.next_observation, images=(image,))
                buf.add(dataclasses.replace(t, next_observation=nxt))


@pytest.mark.slow  # trains a (small) ResNet-18 for 25 epochs: about a minute of CPU
@pytest.mark.timeout(900)
def test_train_reward_command_writes_a_usable_classifier(tmp_path: Path) -> None:
    _buffer(tmp_path / "buffer", episodes=24)
    out = tmp_path / "reward.pt"
    args = ["--image-size", "32", "--width", "8", "--epochs", "25", "--positive-tail", "1", "--margin", "0"]
    proc = subprocess.run(
        user_cmd("train-reward", str(tmp_path / "buffer"), "--out", str(out), *args),
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "frames: 192 (12 positive, 180 negative)" in proc.stdout and out.is_file()
    reward = LearnedReward(SuccessClassifier.load(out), threshold=0.5, mode=RewardMode.STEP)
    rng = np.random.default_rng(1)
    state = np.zeros(f.STATE_DIM, dtype=np.float32)
    bright = [reward(RewardStep(0, state, {"front": _frame(True, rng)})).success for _ in range(10)]
    dark = [reward(RewardStep(0, state, {"front": _frame(False, rng)})).success for _ in range(10)]
    assert sum(bright) >= 8 and sum(dark) <= 2, (bright, dark)


def test_train_reward_on_a_missing_buffer_says_so(tmp_path: Path) -> None:
    proc = subprocess.run(
        user_cmd("train-reward", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.pt")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "nothing" in proc.stderr
