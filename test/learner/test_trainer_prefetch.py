"""The async trainer on prefetched batches (`speed.prefetch`): the same update-to-data ratio, the same batches
in the same order and so the same training as without, and the prefetcher stops with the trainer."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from test.conftest import wait_until
from test.learner.test_trainer import _buffer, _fill, _learning
from user.learner.speed import SpeedPlan
from user.learner.trainer import Trainer

pytestmark = pytest.mark.timeout(120)

BATCH = 32


def _train(path: Path, plan: SpeedPlan) -> tuple[Trainer, dict[str, torch.Tensor]]:
    torch.manual_seed(0)  # the actor's samples come from torch's global generator
    learning = _learning()
    buf = _buffer(path, 0.5 * BATCH, min_size=20, error_buffer=BATCH)
    policy = learning.build_policy()
    algorithm = learning.build_algorithm(policy)
    trainer = Trainer(algorithm, buf, learning.state_selector(), sample_timeout_s=0.05, speed=plan)
    _fill(buf, 10)
    allowed_calls = int((0.5 * BATCH * (100 - 20) + BATCH) // BATCH)
    trainer.start_async()
    try:
        assert wait_until(lambda: trainer.counters.update_calls >= allowed_calls, 60.0)
        assert wait_until(lambda: trainer.counters.idle_s > 0.3, 30.0)  # waiting for data the limiter has not allowed
        assert trainer.counters.update_calls == allowed_calls
        assert any(t.name == "learner-prefetch" for t in threading.enumerate()) == plan.prefetch
    finally:
        assert trainer.stop()
        buf.close()
    assert trainer.failed is None
    assert not any(t.name == "learner-prefetch" for t in threading.enumerate())
    return trainer, {k: v.clone() for k, v in trainer.algorithm.policy.actor.state_dict().items()}


def test_prefetched_training_trains_as_the_plain_loop(tmp_path: Path) -> None:
    plain, plain_weights = _train(tmp_path / "plain", SpeedPlan())
    fetched, fetched_weights = _train(tmp_path / "fetched", SpeedPlan(prefetch=True))
    assert fetched.counters.update_calls == plain.counters.update_calls
    assert fetched.counters.last == plain.counters.last
    assert all(torch.equal(plain_weights[k], fetched_weights[k]) for k in plain_weights)
