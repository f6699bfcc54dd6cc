"""BC and HG-DAgger on action chunks: the test-sized π0 behind `VLAPolicy` learns the chunks of stored episodes by
flow matching; masked steps change nothing; HG-DAgger imitates the human's steps of each chunk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="the π0 model needs the `vla` extra (scripts/install --ros has it)")

from test.buffer.factories import ACTION_DIM, STATE_DIM, episode
from user.algorithms.base import AlgorithmError, TorchBatch, to_torch
from user.algorithms.bc import BC, BCConfig
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, SamplerConfig, StorageConfig
from user.buffer.batch import TransitionBatch
from user.interfaces.domain import Transition
from user.policies import ObservationConfig, PolicyError
from user.policies.pi0 import TEST_SIZE, Pi0Model, Pi0VLA, train_word_tokenizer
from user.policies.vla import VLAPolicy, VLAPolicyConfig

INSTRUCTION = "insert the peg into the hole"
SIGLIP_PIXELS = ObservationConfig(cameras=("front",), image_size=32, image_mean=(0.5,) * 3, image_std=(0.5,) * 3)
H = TEST_SIZE.chunk_size


def _policy() -> VLAPolicy:
    torch.manual_seed(0)
    vla = Pi0VLA(Pi0Model(TEST_SIZE), train_word_tokenizer([INSTRUCTION]), state_dim=STATE_DIM, action_dim=ACTION_DIM)
    return VLAPolicy(vla, VLAPolicyConfig(INSTRUCTION, 0, SIGLIP_PIXELS))


def _episode(e: int, steps: int) -> list[Transition]:
    """A smooth path of actions in [-1, 1], the human in control from step 2 to 3, demonstrations in episode 0."""
    out = []
    for t in episode("a", e, steps, demo=e == 0):
        data = np.sin(0.4 * t.step + e + np.arange(ACTION_DIM, dtype=np.float32)).astype(np.float32) * 0.8
        out.append(replace(t, action=replace(t.action, data=data, intervened=e > 0 and 2 <= t.step <= 3)))
    return out


def _batch(tmp_path: Path, size: int = 16) -> TransitionBatch:
    """A batch of chunks from three stored episodes (one a demonstration), pixels decoded."""
    config = BufferConfig(
        storage=StorageConfig(segment_max_episodes=2),
        sampler=SamplerConfig(kind="uniform", seed=1),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=size,
        prefetch=0,
        chunk_horizon=H,
    )
    with ReplayBuffer.open(tmp_path, config) as buf:
        for e in range(3):
            buf.add_episode(_episode(e, 6))
        return buf.sample()


def _eval_loss(policy: VLAPolicy, batch: TorchBatch) -> float:
    """The chunk loss with fixed noise and times (the same draws each call)."""
    assert batch.action_chunk is not None and batch.chunk_mask is not None
    losses = []
    for seed in range(3):
        torch.manual_seed(seed)
        with torch.no_grad():
            losses.append(float(policy.chunk_loss(batch.obs, batch.action_chunk, batch.chunk_mask)[0]))
    return float(np.mean(losses))


def test_bc_on_stored_chunks_lowers_the_chunk_loss(tmp_path: Path) -> None:
    policy = _policy()
    batch = _batch(tmp_path)
    assert batch.chunk_mask is not None and not batch.chunk_mask.all()  # episode ends are in the batch
    bc = BC(policy, BCConfig(lr=1e-3, batch_size=16))
    tensors = to_torch(batch, policy)
    before = _eval_loss(policy, tensors)
    for _ in range(25):
        stats = bc.update(batch)
    assert "flow_mse" in stats.info and stats.info["valid_steps"] == float(batch.chunk_mask.sum())
    assert _eval_loss(policy, tensors) < 0.7 * before


def test_a_masked_step_changes_nothing(tmp_path: Path) -> None:
    batch = _batch(tmp_path, size=8)
    assert batch.action_chunk is not None and batch.chunk_mask is not None
    changed = batch.action_chunk.copy()
    assert not batch.chunk_mask.all()
    changed[~batch.chunk_mask] = 0.9  # other padding: nobody's action past an episode's end
    other = replace(batch, action_chunk=changed)
    one, two = _policy(), _policy()
    for policy, rows in ((one, batch), (two, other)):
        torch.manual_seed(5)  # the same noise and times
        BC(policy, BCConfig(lr=1e-3)).update(rows)
    for a, b in zip(one.actor.parameters(), two.actor.parameters(), strict=True):
        assert torch.equal(a, b)
    changed[0, 0] += 0.5  # a valid step: it is learned
    torch.manual_seed(5)
    three = _policy()
    BC(three, BCConfig(lr=1e-3)).update(replace(batch, action_chunk=changed))
    assert any(not torch.equal(a, b) for a, b in zip(one.actor.parameters(), three.actor.parameters(), strict=True))


def test_hg_dagger_imitates_the_humans_steps_of_each_chunk(tmp_path: Path) -> None:
    batch = _batch(tmp_path, size=32)
    policy = _policy()
    hg = HGDagger(policy, HGDaggerConfig(use_demos=True))
    rows = hg.select(to_torch(batch, policy))
    assert rows.action_chunk is not None and rows.chunk_intervened is not None and rows.chunk_mask is not None
    mask = hg.chunk_mask(rows)
    human = rows.intervened & ~rows.is_demo
    assert bool(human.any()) and bool(rows.is_demo.any())
    assert torch.equal(mask[human], rows.chunk_mask[human] & rows.chunk_intervened[human])
    assert torch.equal(mask[rows.is_demo], rows.chunk_mask[rows.is_demo])  # demonstrations: their whole chunk
    everything = HGDagger(policy, HGDaggerConfig(chunk_steps="all"))
    assert torch.equal(everything.chunk_mask(rows), rows.chunk_mask)
    stats = hg.update(batch)
    assert stats.info["rows"] == float((batch.intervened | batch.is_demo).sum())
    assert stats.info["valid_steps"] == float(mask.sum())


def test_chunks_travel_with_their_rows(tmp_path: Path) -> None:
    batch = _batch(tmp_path, size=8)
    policy = _policy()
    tensors = to_torch(batch, policy)
    assert tensors.action_chunk is not None and tensors.action_chunk.shape == (8, H, ACTION_DIM)
    order = torch.tensor([7, 6, 5, 4, 3, 2, 1, 0])
    shuffled = tensors.select(order)
    assert shuffled.action_chunk is not None and shuffled.chunk_mask is not None
    assert torch.equal(shuffled.action_chunk, tensors.action_chunk[order])
    assert torch.equal(shuffled.chunk_mask[:, 0], torch.ones(8, dtype=torch.bool))
    assert torch.equal(shuffled.action_chunk[:, 0], shuffled.action)  # each row's chunk starts with its action
    ordered = to_torch(batch.take(order.numpy()), policy)  # the lead's row order before the shares go out
    assert ordered.action_chunk is not None and torch.equal(ordered.action_chunk, shuffled.action_chunk)


def test_a_chunk_learner_without_chunks_is_told_to_set_the_horizon(tmp_path: Path) -> None:
    batch = _batch(tmp_path, size=4)
    plain = replace(batch, action_chunk=None, chunk_mask=None, chunk_intervened=None)
    bc = BC(_policy())
    with pytest.raises(AlgorithmError, match="chunk_horizon"):
        bc.update(plain)
    assert batch.action_chunk is not None and batch.chunk_mask is not None and batch.chunk_intervened is not None
    short = replace(
        batch,
        action_chunk=batch.action_chunk[:, :2],
        chunk_mask=batch.chunk_mask[:, :2],
        chunk_intervened=batch.chunk_intervened[:, :2],
    )
    with pytest.raises(PolicyError, match="chunk_horizon to the model's chunk size 4"):
        bc.update(short)
    with pytest.raises(AlgorithmError, match=r"chunks have shape \(4, 2, 4\) \(mask \(4, 2\), intervened \(4, 4\)\)"):
        bc.update(replace(short, chunk_intervened=batch.chunk_intervened))
    assert bc.steps == 0
