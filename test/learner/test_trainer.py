"""Trainer: the update-to-data ratio comes from the buffer's rate limiter (async), sync trains exactly the
calls asked for, and the accounting of busy and idle time adds up."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest

from test.buffer import factories as f
from test.conftest import wait_until
from user.buffer.config import BufferConfig, RateLimiterConfig, StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.replay import ReplayBuffer
from user.learner.config import LearningConfig
from user.learner.trainer import Trainer, TrainingDataError
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


# ---- issue 13, finding 6: unreadable stored data ---------------------------------------------------------


def _disk_buffer(path: Path, *, prefetch: int, episodes: int = 3) -> ReplayBuffer:
    """A buffer of `episodes` 10-step episodes in one closed segment, read from disk on every sample (no cache)."""
    limiter = RateLimiterConfig(samples_per_insert=0.0, min_size=10, error_buffer=BATCH)
    storage = StorageConfig(cache_size=0, fsync="never")
    buf = ReplayBuffer.open(
        path, BufferConfig(rate_limiter=limiter, batch_size=BATCH, prefetch=prefetch, storage=storage)
    )
    _fill(buf, episodes)
    assert buf.writer is not None
    buf.writer.roll()
    return buf


def _damage(buf: ReplayBuffer, index: int) -> None:
    """Overwrite the first byte of stored transition `index`'s record (a bad sector under one message)."""
    [row] = buf.storage.index.transitions(index, index + 1)
    [seg] = [s for s in buf.storage.index.segments() if s.id == row.segment_id]
    with open(segment_path(buf.storage.directory, seg.name), "r+b") as f:
        f.seek(row.offset)
        f.write(b"\xff")


def _trainer(buf: ReplayBuffer, **kwargs: object) -> Trainer:
    learning = _learning()
    return Trainer(learning.build_algorithm(learning.build_policy()), buf, learning.state_selector(), **kwargs)  # type: ignore[arg-type]


def _skipped_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipped a batch")]


def test_a_batch_with_an_unreadable_transition_is_skipped_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Sync path: most batches of 32 out of 30 transitions draw the damaged one; each is skipped and counted,
    the cause (file, byte) is logged once, and every update asked for is still done."""
    buf = _disk_buffer(tmp_path / "b", prefetch=0)
    _damage(buf, 7)
    trainer = _trainer(buf)
    with caplog.at_level(logging.ERROR, logger="user.learner"):
        assert trainer.train(5, timeout_s=30.0) == 5
    assert trainer.counters.update_calls == 5 and trainer.failed is None
    assert trainer.unreadable_batches >= 2  # drawn again and again (seeded sampler) ...
    [line] = _skipped_lines(caplog)  # ... and said once
    assert "CorruptRecordError" in line and "bad record at byte" in line and "opcode 0xff" in line
    buf.close()


def test_the_training_thread_survives_an_unreadable_transition(tmp_path: Path) -> None:
    """issue 13, finding 6: one unreadable stored transition killed the training thread (through the prefetch
    worker, which then raised the same error for ever) while the learner process stayed up."""
    buf = _disk_buffer(tmp_path / "b", prefetch=2)
    _damage(buf, 12)
    trainer = _trainer(buf, sample_timeout_s=0.05)
    trainer.start_async()
    try:
        wait_until(lambda: trainer.counters.update_calls >= 10 or not trainer.running, 30.0)
        assert trainer.failed is None and trainer.running and trainer.counters.update_calls >= 10
        assert trainer.unreadable_batches >= 1
    finally:
        assert trainer.stop()
        buf.close()


def test_training_stops_visibly_when_batch_after_batch_cannot_be_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every record gone (the segment cut short): after N unreadable batches in a row the thread stops with a
    TrainingDataError in `failed`, one error line, and `on_failure` told; a sync call raises it."""
    buf = _disk_buffer(tmp_path / "b", prefetch=2)
    [seg] = buf.storage.index.segments()
    os.truncate(segment_path(buf.storage.directory, seg.name), 100)
    told: list[BaseException] = []
    trainer = _trainer(buf, sample_timeout_s=0.05, on_failure=told.append, max_unreadable_in_a_row=4)
    with caplog.at_level(logging.ERROR, logger="user.learner"):
        trainer.start_async()
        assert wait_until(lambda: not trainer.running, 30.0)
    assert isinstance(trainer.failed, TrainingDataError) and told == [trainer.failed]
    assert str(trainer.failed).startswith("4 batches in a row could not be read from the buffer (last: Truncated")
    assert trainer.unreadable_batches == 4 and trainer.counters.update_calls == 0
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("training stopped")] == [
        f"training stopped: {trainer.failed}"
    ]
    trainer.stop()
    sync = _trainer(buf, max_unreadable_in_a_row=3)
    with pytest.raises(TrainingDataError, match="^3 batches in a row"):
        sync.train(2, timeout_s=30.0)
    assert isinstance(sync.failed, TrainingDataError)
    buf.close()


def test_batches_without_the_policy_s_camera_are_skipped_then_training_stops_naming_it(tmp_path: Path) -> None:
    """Stored transitions without the camera an image policy looks at (a robot once recorded a step before its
    camera's first frame): each such batch is skipped as unreadable, naming the camera, and batch after batch of them
    stops training with that cause, instead of the policy failing inside an update."""
    from user.policies.cnn import CNNPolicyConfig
    from user.policies.preprocess import ObservationConfig
    from user.policies.resnet import ImageEncoderConfig

    tiny = ImageEncoderConfig(channels=(8, 8, 16, 16), stem_channels=8, groups=2, spatial_features=2, bottleneck=8)
    cnn = CNNPolicyConfig(
        state_dim=f.STATE_DIM,
        action_dim=f.ACTION_DIM,
        observation=ObservationConfig(cameras=("wrist",), image_size=32),
        encoder=tiny,
        hidden=(16,),
    )
    learning = LearningConfig(policy_kind="cnn", cnn=cnn, exclude_state_prefixes=())
    buf = _disk_buffer(tmp_path / "b", prefetch=0)  # transitions of state alone
    trainer = Trainer(learning.build_algorithm(learning.build_policy()), buf, learning.state_selector(),
                      max_unreadable_in_a_row=3)  # fmt: skip
    with pytest.raises(TrainingDataError, match=r"no image from camera\(s\) \['wrist'\], which the policy looks at"):
        trainer.train(1, timeout_s=30.0)
    assert trainer.unreadable_batches == 3 and trainer.counters.update_calls == 0
    buf.close()
