"""Action chunks: each sampled step carries the next H actions of its own episode, exactly as stored, masked and
padded with the episode's last action past its end, interventions marked; off, batches are as before."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import ACTION_DIM, episode
from user.buffer import BatchError, BufferConfig, RateLimiterConfig, ReplayBuffer, SamplerConfig, StorageConfig
from user.buffer.batch import TransitionBatch
from user.buffer.chunks import chunk_rows
from user.buffer.errors import BufferError
from user.interfaces.domain import Transition

LENGTHS = (3, 7, 2, 5)  # steps of the stored episodes, in commit order


def _config(horizon: int, batch: int = 64, **storage: object) -> BufferConfig:
    return BufferConfig(
        storage=StorageConfig(**{"segment_max_episodes": 1, "cache_size": 1000, **storage}),  # type: ignore[arg-type]
        sampler=SamplerConfig(kind="uniform", seed=3),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=batch,
        prefetch=0,
        decode_images=False,
        chunk_horizon=horizon,
    )


def _episode(e: int, steps: int) -> list[Transition]:
    """Episode `e`: every action unique (100 e + step, then its dimension), a human in control at odd steps."""
    out = []
    for t in episode("a", e, steps, images=False):
        data = np.float32(100 * e + t.step) + np.arange(ACTION_DIM, dtype=np.float32) / 10
        out.append(replace(t, action=replace(t.action, data=data, intervened=t.step % 2 == 1)))
    return out


def _stored(buf: ReplayBuffer) -> list[list[Transition]]:
    episodes = [_episode(e, n) for e, n in enumerate(LENGTHS)]
    for ep in episodes:
        buf.add_episode(ep)
    return episodes


def _expected(episodes: list[list[Transition]], index: int, horizon: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chunk, mask, intervened) of transition `index`, from the episodes as they were added."""
    flat = [(ep, s) for ep in episodes for s in range(len(ep))]
    ep, step = flat[index]
    actions = [ep[min(step + k, len(ep) - 1)].action for k in range(horizon)]
    mask = np.array([step + k < len(ep) for k in range(horizon)])
    return np.stack([a.data for a in actions]), mask, np.array([a.intervened for a in actions]) & mask


@pytest.mark.parametrize("cache_size", [1000, 0], ids=["cached", "from-disk"])
def test_sampled_chunks_are_the_stored_episode(tmp_path: Path, cache_size: int) -> None:
    with ReplayBuffer.open(tmp_path, _config(4, cache_size=cache_size)) as buf:
        episodes = _stored(buf)
        assert len(list((tmp_path / "segments").iterdir())) == len(LENGTHS)  # one episode per segment
        reads = buf.storage.disk_reads
        batch = buf.sample()
        assert (buf.storage.disk_reads > reads) == (cache_size == 0)
    assert batch.action_chunk is not None and batch.chunk_mask is not None and batch.chunk_intervened is not None
    assert batch.action_chunk.shape == (64, 4, ACTION_DIM) and batch.action_chunk.dtype == np.float32
    assert batch.chunk_mask.shape == batch.chunk_intervened.shape == (64, 4) and batch.horizon == 4
    assert len(set(batch.indices.tolist())) > 10  # many different steps drawn, episode ends among them
    for row, index in enumerate(batch.indices):
        chunk, mask, intervened = _expected(episodes, int(index), 4)
        assert np.array_equal(batch.action_chunk[row], chunk), index
        assert np.array_equal(batch.chunk_mask[row], mask) and np.array_equal(batch.chunk_intervened[row], intervened)
        assert np.array_equal(batch.action_chunk[row, 0], batch.action[row])  # the chunk starts with the step's own


def test_the_end_of_an_episode_is_masked_and_padded_with_its_last_action(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(5)) as buf:
        episodes = _stored(buf)
        view = buf.storage.view()
        chunks = chunk_rows(view, np.array([1, 2, 3, 9, 11, 16]), 5)
    # episode 0 is transitions 0-2, episode 1 is 3-9 (in another segment), episode 3 (the newest) is 12-16
    assert chunks.rows.tolist() == [
        [1, 2, 2, 2, 2],
        [2, 2, 2, 2, 2],  # the last step of an episode: nothing of the next one, in the next segment
        [3, 4, 5, 6, 7],
        [9, 9, 9, 9, 9],
        [11, 11, 11, 11, 11],
        [16, 16, 16, 16, 16],  # the buffer's newest transition: nothing stored after it
    ]
    assert chunks.mask.sum(axis=1).tolist() == [2, 1, 5, 1, 1, 1]
    chunk, mask, intervened = _expected(episodes, 1, 5)
    assert np.array_equal(chunk[2:], np.stack([episodes[0][-1].action.data] * 3)) and not mask[2:].any()
    assert not intervened[2:].any()  # the padding is nobody's action


def test_bad_chunk_requests_are_named(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(3)) as buf:
        _stored(buf)
        view = buf.storage.view()
        with pytest.raises(BufferError, match="one action at least"):
            chunk_rows(view, np.array([0]), 0)
        with pytest.raises(BufferError, match="17 are stored"):
            chunk_rows(view, np.array([17]), 3)


def test_off_the_batch_carries_no_chunks(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path / "off", _config(0)) as off, ReplayBuffer.open(tmp_path / "on", _config(3)) as on:
        _stored(off)
        _stored(on)
        plain, chunked = off.sample(), on.sample()
    assert plain.action_chunk is None and plain.chunk_mask is None and plain.chunk_intervened is None
    assert plain.horizon == 0
    assert np.array_equal(plain.indices, chunked.indices)  # the same draws: chunks change what a batch carries only
    assert np.array_equal(plain.action, chunked.action) and np.array_equal(plain.state, chunked.state)


def test_chunks_travel_with_their_rows(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(3, batch=8)) as buf:
        _stored(buf)
        batch = buf.sample()
    assert batch.action_chunk is not None
    order = np.arange(8)[::-1]
    taken = batch.take(order)
    assert taken.action_chunk is not None and np.array_equal(taken.action_chunk, batch.action_chunk[order])
    both = TransitionBatch.concat([batch, taken])
    assert both.chunk_mask is not None and both.chunk_mask.shape == (16, 3)
    filled = batch.map(np.copy).fill(np.arange(8), taken)
    assert filled.chunk_intervened is not None and taken.chunk_intervened is not None
    assert np.array_equal(filled.chunk_intervened, taken.chunk_intervened)
    plain = replace(batch, action_chunk=None, chunk_mask=None, chunk_intervened=None)
    with pytest.raises(BatchError, match="chunks of 3 and 0 actions"):
        TransitionBatch.concat([batch, plain])
    with pytest.raises(BatchError, match="chunks of 0 and 3 actions"):
        plain.map(np.copy).fill(np.arange(8), batch)
