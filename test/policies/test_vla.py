"""VLA adapter: chunk replay behind `act`, re-query horizon, reset, weights, and BC fine-tuning."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
import torch
from torch import nn

from user.algorithms.base import TorchBatch
from user.algorithms.bc import BC, BCConfig
from user.policies import ObservationConfig, PolicyError, PolicyInput
from user.policies.vla import VLAModel, VLAPolicy, VLAPolicyConfig


class TinyVLA(VLAModel):
    """A tiny local stand-in for a pi0-style model: conv image features + state + hashed instruction."""

    def __init__(self, state_dim: int = 3, action_dim: int = 2, chunk_size: int = 4) -> None:
        super().__init__()
        self.state_dim, self.action_dim, self.chunk_size = state_dim, action_dim, chunk_size
        torch.manual_seed(0)
        self.conv = nn.Sequential(nn.Conv2d(3, 4, 3, 2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.words = nn.EmbeddingBag(64, 4)
        self.head = nn.Linear(4 + 4 + state_dim, chunk_size * action_dim)

    def predict(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> torch.Tensor:
        ids = torch.tensor([[sum(map(ord, w)) % 64 for w in instruction.split()] or [0]] * len(state))
        x = torch.cat([self.conv(images["front"]), self.words(ids), state], dim=-1)
        return torch.tanh(self.head(x)).view(len(state), self.chunk_size, self.action_dim)


def make(horizon: int = 0) -> VLAPolicy:
    obs = ObservationConfig(cameras=("front",), image_size=16)
    return VLAPolicy(TinyVLA(), VLAPolicyConfig("insert the peg", horizon, obs))


def observation(seed: int) -> PolicyInput:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)
    return PolicyInput(rng.normal(size=3).astype(np.float32), {"front": img})


def test_act_replays_the_chunk_then_requeries() -> None:
    policy = make()
    obs = observation(0)
    with torch.no_grad():
        chunk = policy.chunk(policy.preprocess(obs.state[None], {"front": obs.images["front"][None]}))[0].numpy()
    actions = [policy.act(observation(i)) for i in range(4)]
    np.testing.assert_allclose(np.stack(actions), chunk, atol=1e-6)  # later observations do not change the chunk
    assert policy.queries == 1
    policy.act(observation(5))
    assert policy.queries == 2


def test_execute_horizon_and_reset() -> None:
    policy = make(horizon=2)
    for i in range(4):
        policy.act(observation(i))
    assert policy.queries == 2
    policy.act(observation(9))
    policy.reset()
    policy.act(observation(9))
    assert policy.queries == 4
    with pytest.raises(PolicyError, match="exceeds"):
        make(horizon=5)


def test_weights_round_trip_and_shape_check() -> None:
    a, b = make(), make()
    with torch.no_grad():
        a.actor.head.bias.add_(1.0)  # type: ignore[union-attr, operator]
    b.load_weights(a.get_weights())
    np.testing.assert_allclose(a.act(observation(1)), b.act(observation(1)))
    assert a.encoder().out_features == 3


def test_bc_fine_tunes_the_first_action_of_the_chunk() -> None:
    policy = make()
    bc = BC(policy, BCConfig(lr=1e-2))
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (16, 24, 24, 3), dtype=np.uint8)
    obs = policy.preprocess(rng.normal(size=(16, 3)).astype(np.float32), {"front": images})
    target = torch.full((16, 2), 0.5)
    before, _ = policy.imitation_loss(obs, target, "mse")
    flags = torch.zeros(16, dtype=torch.bool)
    batch = TorchBatch(obs, target, torch.zeros(16), obs, torch.zeros(16), flags, flags)
    for _ in range(30):
        bc.update_tensors(batch)
    after, info = policy.imitation_loss(obs, target, "mse")
    assert float(after.detach()) < 0.2 * float(before.detach()) and "action_mse" in info
    with pytest.raises(PolicyError, match="mse"):
        policy.imitation_loss(obs, target, "nll")


def test_a_model_without_a_chunk_loss_learns_the_first_action_of_chunked_batches() -> None:
    policy = make()
    assert not policy.learns_chunks
    rng = np.random.default_rng(1)
    obs = policy.preprocess(rng.normal(size=(4, 3)).astype(np.float32), {"front": np.zeros((4, 24, 24, 3), np.uint8)})
    with pytest.raises(PolicyError, match="TinyVLA has no chunk loss"):
        policy.chunk_loss(obs, torch.zeros(4, 4, 2), torch.ones(4, 4, dtype=torch.bool))
    flags = torch.zeros(4, dtype=torch.bool)
    chunk, mask = torch.zeros(4, 4, 2), torch.ones(4, 4, dtype=torch.bool)
    batch = TorchBatch(obs, torch.zeros(4, 2), torch.zeros(4), obs, torch.zeros(4), flags, flags, chunk, mask, mask)
    stats = BC(policy, BCConfig(lr=1e-2)).update_tensors(batch)
    assert "action_mse" in stats.info  # today's loss: the chunks are not its to learn


class NoisyVLA(TinyVLA):
    """A model that draws at random when it predicts, as π0 draws its initial noise."""

    def predict(self, images: Mapping[str, torch.Tensor], state: torch.Tensor, instruction: str) -> torch.Tensor:
        chunk = super().predict(images, state, instruction)
        return (chunk + 0.5 * torch.randn_like(chunk)).clamp(-1.0, 1.0)


def test_a_deterministic_query_seeds_the_models_draws_and_leaves_the_global_ones_alone() -> None:
    obs_config = ObservationConfig(cameras=("front",), image_size=16)
    a, b = (VLAPolicy(NoisyVLA(), VLAPolicyConfig("insert the peg", 0, obs_config)) for _ in range(2))
    torch.manual_seed(7)
    state = torch.random.get_rng_state()
    first = [a.act(observation(1), deterministic=True) for _ in range(4)]  # one query: its chunk
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(8)  # other global draws: the same chunk
    assert np.array_equal(np.stack(first), np.stack([b.act(observation(1), deterministic=True) for _ in range(4)]))
    a.reset()
    assert not np.array_equal(a.act(observation(1)), first[0])  # a stochastic query draws afresh
    obs = a.preprocess(observation(1).state[None], {"front": observation(1).images["front"][None]})
    assert torch.equal(a.act_tensor(obs, deterministic=True), b.act_tensor(obs, deterministic=True))
