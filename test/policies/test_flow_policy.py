"""Flow-matching policy: the maths by hand, Euler integration, path likelihood, shapes, BC learning, weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.base import to_torch
from user.config import ConfigError, from_mapping
from user.policies.base import PolicyInput, TensorObs
from user.policies.draws import Draws
from user.policies.flow import (
    FlowPolicy,
    FlowPolicyConfig,
    flow_matching_loss,
    interpolate,
    path_log_prob,
    time_embedding,
)
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _policy(seed: int = 0, **cfg: object) -> FlowPolicy:
    base: dict[str, object] = {"state_dim": 3, "action_dim": 2, "hidden": [16, 16], "steps": 3, "seed": seed}
    return FlowPolicy(from_mapping(FlowPolicyConfig, {**base, **cfg}, where="test"))


def _constant_velocity(policy: FlowPolicy, velocity: float, raw_log_std: float) -> None:
    """Make the velocity network output `velocity` and noise log std from `raw_log_std` everywhere."""
    a = policy.action_dim
    with torch.no_grad():
        policy.actor.velocity.out.weight.zero_()
        policy.actor.velocity.out.bias.copy_(torch.tensor([velocity] * a + [raw_log_std] * a))


def test_time_embedding_by_hand() -> None:
    emb = time_embedding(torch.tensor([0.0, 0.5]), 1)
    assert torch.allclose(emb, torch.tensor([[0.0, 0.0, 1.0], [0.5, 1.0, 0.0]]), atol=1e-6)
    assert time_embedding(torch.tensor([0.25]), 0).shape == (1, 1)


def test_interpolate_and_flow_matching_loss_by_hand() -> None:
    x0, x1 = torch.tensor([[0.0, 2.0]]), torch.tensor([[1.0, 0.0]])
    assert torch.allclose(interpolate(x0, x1, torch.tensor([0.25])), torch.tensor([[0.25, 1.5]]))
    # target velocity x1 - x0 = [1, -2]; prediction [0, 0] -> 1 + 4 = 5
    loss, info = flow_matching_loss(torch.zeros(1, 2), x0, x1)
    assert math.isclose(float(loss), 5.0) and math.isclose(info["flow_mse"], 5.0)
    two, _ = flow_matching_loss(
        torch.tensor([[1.0, -2.0], [0.0, 0.0]]), torch.zeros(2, 2), torch.tensor([[1.0, -2.0], [1.0, 1.0]])
    )
    assert math.isclose(float(two), (0.0 + 2.0) / 2)


def test_path_log_prob_by_hand() -> None:
    xs = [torch.tensor([[0.0]]), torch.tensor([[1.0]]), torch.tensor([[0.5]])]
    means = [torch.tensor([[0.0]]), torch.tensor([[1.5]])]
    log_stds = [torch.tensor([[0.0]]), torch.tensor([[math.log(2.0)]])]
    step1 = -0.5 * 1.0 - HALF_LOG_2PI  # N(1; 0, 1)
    step2 = -0.5 * 0.25 - math.log(2.0) - HALF_LOG_2PI  # N(0.5; 1.5, 2): z = -0.5
    assert math.isclose(float(path_log_prob(xs, means, log_stds, "clip")), step1 + step2, rel_tol=1e-6)
    tanh_term = math.log(1 - math.tanh(0.5) ** 2)
    assert math.isclose(float(path_log_prob(xs, means, log_stds, "tanh")), step1 + step2 - tanh_term, rel_tol=1e-5)


def test_deterministic_euler_integration_by_hand() -> None:
    policy = _policy(steps=4)
    _constant_velocity(policy, 0.8, 0.0)
    obs = PolicyInput(np.zeros(3, np.float32))
    # x_0 = 0, four steps of 0.8 / 4 -> x_4 = 0.8
    assert np.allclose(policy.act(obs, deterministic=True), math.tanh(0.8), atol=1e-6)
    clipped = _policy(steps=4, squash="clip")
    _constant_velocity(clipped, 1.6, 0.0)
    assert np.allclose(clipped.act(obs, deterministic=True), 1.0)


def test_noisy_sample_and_its_log_likelihood_by_hand() -> None:
    policy = _policy(steps=2, squash="clip", noise_log_std_min=-2.0, noise_log_std_max=0.0)
    _constant_velocity(policy, 0.4, 0.0)  # raw 0 -> log std at the middle of [-2, 0] = -1
    obs = TensorObs(torch.zeros(1, 3))
    torch.manual_seed(3)
    action, log_prob = policy.sample(obs)
    torch.manual_seed(3)
    x0 = torch.randn(1, 2)
    e1, e2 = torch.randn(1, 2), torch.randn(1, 2)
    std = math.exp(-1.0)
    x2 = x0 + 0.4 + std * (e1 + e2)  # each step: + 0.4 / 2 + std * eps
    assert torch.allclose(action, x2.clamp(-1, 1), atol=1e-6)
    expected = 2 * 2 * (1.0 - HALF_LOG_2PI)  # -log std = +1 per step and dim
    expected += -0.5 * float(e1.pow(2).sum() + e2.pow(2).sum())
    assert math.isclose(float(log_prob.detach()), expected, rel_tol=1e-5)


def test_shapes_range_and_gradients() -> None:
    policy = _policy()
    obs = to_torch(fixed_batch(7), policy).obs
    action, log_prob = policy.sample(obs)
    assert action.shape == (7, 2) and log_prob.shape == (7,)
    assert bool((action.abs() <= 1).all())
    log_prob.mean().backward()  # type: ignore[no-untyped-call]
    assert policy.actor.velocity.out.weight.grad is not None
    assert float(policy.actor.velocity.out.weight.grad.abs().sum()) > 0
    a = policy.act(PolicyInput(np.ones(3, np.float32)))
    assert a.shape == (2,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1)


def test_image_flow_policy_shapes() -> None:
    enc = {
        "channels": [8, 8],
        "blocks": [1, 1],
        "stem_channels": 8,
        "groups": 2,
        "spatial_features": 2,
        "bottleneck": 8,
    }
    policy = _policy(observation={"cameras": ["wrist"], "image_size": 16}, encoder=enc)
    obs = policy.preprocess(np.zeros((4, 3), np.float32), {"wrist": np.zeros((4, 24, 24, 3), np.uint8)})
    assert obs.images["wrist"].shape == (4, 3, 16, 16)
    action, log_prob = policy.sample(obs)
    assert action.shape == (4, 2) and log_prob.shape == (4,)
    assert policy.encoder()(obs).shape == (4, 8 + 3)


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError, match="squash"):
        from_mapping(FlowPolicyConfig, {"squash": "sigmoid"}, where="flow")
    with pytest.raises(ConfigError, match="steps"):
        from_mapping(FlowPolicyConfig, {"steps": 0}, where="flow")
    with pytest.raises(ConfigError, match="image_size"):
        from_mapping(FlowPolicyConfig, {"observation": {"cameras": ["wrist"], "image_size": None}}, where="flow")
    assert isinstance(FlowPolicyConfig().encoder, ImageEncoderConfig)
    assert FlowPolicyConfig().observation == ObservationConfig(image_size=None)


def test_flow_matching_bc_learns_a_fixed_batch() -> None:
    policy = _policy(seed=1, hidden=[32, 32])
    batch = to_torch(fixed_batch(32), policy)
    optim = torch.optim.Adam(policy.actor.parameters(), lr=3e-3)

    def held_out() -> float:
        with torch.no_grad():
            return float(policy.imitation_loss(batch.obs, batch.action, Draws(torch.Generator().manual_seed(99)))[0])

    before = held_out()
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        loss, _ = policy.imitation_loss(batch.obs, batch.action, Draws(generator))
        optim.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        optim.step()
    assert held_out() < 0.5 * before


def test_flat_weights_round_trip() -> None:
    src, dst = _policy(seed=1), _policy(seed=2)
    assert not torch.equal(src.get_weights().data, dst.get_weights().data)
    src.version = 9
    dst.load_weights(src.get_weights())
    obs = PolicyInput(np.arange(3, dtype=np.float32))
    assert dst.version == 9
    assert np.array_equal(src.act(obs, deterministic=True), dst.act(obs, deterministic=True))
