"""Trainer: the update-to-data ratio comes from the buffer's rate limiter (async), sync trains exactly the
calls asked for, and the accounting of busy and idle time adds up."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from test.buffer import factories as f
from test.conftest import wait_until
from user.buffer.config import BufferConfig, RateLimiterConfig
from user.buffer.replay import ReplayBuffer
from user.learner.config import LearningConfig
from user.learner.trainer import Trainer
from user.policies.mlp import MLPPolicyConfig

pytestmark = pytest.mark.timeout(60)

BATCH = 32


def _learning(algorithm: str = "sac") -> LearningConfig:
    from user.algorithms.sac import SACConfig

    return LearningConfig(
        mlp=MLPPolicyConfig(state_dim=f.STATE_DIM, action_dim=f.ACTION_DIM, hidden=(32, 32)),
        algorithm=algorithm,  # type: ignore[arg-type]
        sac=SACConfig(batch_size=BATCH, num_critics=2, critic_hidden=(32, 32)),
        exclude_state_prefixes=(),
    )


def _buffer(path: Path, spi: float, min_size: int, error_buffer: float) -> ReplayBuffer:
    limiter = RateLimiterConfig(samples_per_insert=spi, min_size=min_size, error_buffer=error_buffer)
    return ReplayBuffer.open(path, BufferConfig(rate_limiter=limiter, batch_size=BATCH, prefetch=0))


def _fill(buf: ReplayBuffer, episodes: int, start: int = 0) -> None:
    for e in range(start, start + episodes):
        for t in f.episode("r", e, steps=10, images=False):
            buf.add(t)


def test_async_training_stops_at_the_update_to_data_ratio(tmp_path: Path) -> None:
    learning = _learning()
    updates_per_step = 0.5  # gradient steps per transition; one call = one step of BATCH rows here
    spi = updates_per_step * BATCH
    buf = _buffer(tmp_path / "b", spi, min_size=20, error_buffer=BATCH)
    policy = learning.build_policy()
    trainer = Trainer(learning.build_algorithm(policy), buf, learning.state_selector(), sample_timeout_s=0.05)
    _fill(buf, 10)  # 100 transitions
    trainer.start_async()
    try:
        budget = spi * (100 - 20) + BATCH  # the limiter's allowance in sampled rows
        allowed_calls = int(budget // BATCH)
        assert wait_until(lambda: trainer.counters.update_calls >= allowed_calls, 30.0)
        time.sleep(0.5)  # it must stop there: more data is needed
        assert trainer.counters.update_calls == allowed_calls
        _fill(buf, 4, start=10)  # 40 more transitions allow 20 more calls
        assert wait_until(lambda: trainer.counters.update_calls >= allowed_calls + 20, 30.0)
        time.sleep(0.3)
        assert trainer.counters.update_calls == allowed_calls + 20
        assert trainer.counters.gradient_steps == trainer.counters.update_calls  # utd_ratio 1: one step per call
        assert 0.0 < trainer.idle_fraction() < 1.0
        assert "loss/critic" in trainer.counters.last
    finally:
        assert trainer.stop()
        buf.close()
    assert trainer.failed is None


def test_sync_training_does_exactly_the_calls_asked(tmp_path: Path) -> None:
    learning = _learning()
    buf = _buffer(tmp_path / "b", 0.0, min_size=10, error_buffer=BATCH)
    trainer = Trainer(learning.build_algorithm(learning.build_policy()), buf, learning.state_selector())
    _fill(buf, 3)
    assert trainer.train(7, timeout_s=30.0) == 7
    assert trainer.counters.update_calls == 7
    buf.close()


def test_training_waits_without_data_and_counts_it_idle(tmp_path: Path) -> None:
    learning = _learning()
    buf = _buffer(tmp_path / "b", 0.0, min_size=10, error_buffer=BATCH)
    trainer = Trainer(learning.build_algorithm(learning.build_policy()), buf, learning.state_selector())
    started = time.monotonic()
    assert trainer.train(3, timeout_s=0.3) == 0  # nothing stored: the deadline ends it
    assert time.monotonic() - started < 5.0
    assert trainer.counters.update_calls == 0 and trainer.counters.idle_s > 0 and trainer.idle_fraction() == 1.0
    buf.close()


def test_the_policy_sees_the_state_columns_the_batch_names_without_a_buffer_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from user.algorithms.base import TrainingStats
    from user.buffer.batch import TransitionBatch

    names = ("x0", "task/goal", "x1", "x2", "task/peg", "x3", "x4")  # f.STATE_DIM entries, 2 privileged
    learning = replace(
        _learning(),
        mlp=MLPPolicyConfig(state_dim=5, action_dim=f.ACTION_DIM, hidden=(8,)),
        exclude_state_prefixes=("task/",),
    )
    buf = _buffer(tmp_path / "b", 0.0, min_size=10, error_buffer=BATCH)
    for t in f.episode("r", 0, steps=20, images=False):
        state = t.observation.state + np.arange(f.STATE_DIM, dtype=np.float32)
        named = replace(t.observation, state=state, state_names=names)
        buf.add(replace(t, observation=named, next_observation=replace(t.next_observation, state_names=names)))
    algorithm = learning.build_algorithm(learning.build_policy())
    seen: list[TransitionBatch] = []
    update = algorithm.update

    def recording_update(batch: TransitionBatch) -> TrainingStats:
        seen.append(batch)
        return update(batch)

    monkeypatch.setattr(algorithm, "update", recording_update)
    monkeypatch.setattr(buf, "get", lambda _indices: pytest.fail("the trainer read a transition for its names"))
    trainer = Trainer(algorithm, buf, learning.state_selector())
    assert trainer.train(2, timeout_s=30.0) == 2
    kept = [0, 2, 3, 5, 6]
    for batch in seen:
        assert batch.state.shape == (BATCH, 5) and batch.next_state.shape == (BATCH, 5)
        assert batch.state_names == ("x0", "x1", "x2", "x3", "x4")
        stored = np.stack([buf.storage.get([int(i)])[0].observation.state for i in batch.indices])
        assert np.array_equal(batch.state, stored[:, kept])
    buf.close()
