"""MLP policy: act shapes and range, flat weights round trip, tanh-Gaussian maths by hand, preprocessing."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from user.config import ConfigError, from_mapping
from user.policies.base import PolicyError, PolicyInput
from user.policies.gaussian import gaussian_log_prob, tanh_gaussian_log_prob, tanh_log_det
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.preprocess import ObservationConfig


def _policy(seed: int = 0) -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=4, action_dim=2, hidden=(16, 16), seed=seed))


def test_act_returns_bounded_actions() -> None:
    policy = _policy()
    obs = PolicyInput(np.ones(4, np.float32))
    a = policy.act(obs)
    assert a.shape == (2,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1)
    assert np.array_equal(policy.act(obs, deterministic=True), policy.act(obs, deterministic=True))


def test_seed_sets_initial_weights_without_touching_global_rng() -> None:
    torch.manual_seed(3)
    before = torch.rand(1)
    torch.manual_seed(3)
    a, b = _policy(seed=7), _policy(seed=7)
    assert torch.equal(torch.rand(1), before)
    assert torch.equal(a.get_weights().data, b.get_weights().data)
    assert not torch.equal(a.get_weights().data, _policy(seed=8).get_weights().data)


def test_flat_weights_round_trip_and_views() -> None:
    src, dst = _policy(seed=1), _policy(seed=2)
    src.version = 12
    w = src.get_weights()
    assert w.data.dim() == 1 and w.data.is_contiguous() and w.data.numel() == w.spec.numel
    assert w.spec.numel == sum(p.numel() for p in src.actor.parameters())
    dst.load_weights(w)
    assert dst.version == 12
    obs = PolicyInput(np.arange(4, dtype=np.float32))
    assert np.array_equal(src.act(obs, deterministic=True), dst.act(obs, deterministic=True))
    for p, q in zip(src.actor.parameters(), dst.actor.parameters(), strict=True):
        assert torch.equal(p, q)
    w.data.zero_()  # a copy: changing it leaves the policy alone
    assert float(src.get_weights().data.abs().sum()) > 0


def test_weights_cast_for_sending_and_back() -> None:
    src, dst = _policy(seed=1), _policy(seed=2)
    dst.load_weights(src.get_weights(dtype=torch.bfloat16))
    assert torch.allclose(dst.get_weights().data, src.get_weights().data, atol=1e-2, rtol=1e-2)


def test_mismatched_weights_are_refused() -> None:
    other = MLPPolicy(MLPPolicyConfig(state_dim=4, action_dim=2, hidden=(8,)))
    with pytest.raises(PolicyError, match="do not fit"):
        _policy().load_weights(other.get_weights())


def test_optimizer_step_updates_the_flat_buffer() -> None:
    policy = _policy()
    before = policy.get_weights().data
    opt = torch.optim.SGD(policy.actor.parameters(), lr=0.1)
    obs = policy.preprocess(np.ones((3, 4), np.float32), {})
    policy.dist_params(obs)[0].sum().backward()  # type: ignore[no-untyped-call]
    opt.step()
    assert not torch.equal(before, policy.get_weights().data)


def test_tanh_gaussian_log_prob_by_hand() -> None:
    mean, log_std = torch.tensor([[0.0]]), torch.tensor([[0.0]])
    # at u = 0: log N(0; 0, 1) = -0.5 log(2 pi); tanh'(0) = 1
    assert math.isclose(
        float(gaussian_log_prob(torch.zeros(1, 1), mean, log_std)), -0.5 * math.log(2 * math.pi), rel_tol=1e-6
    )
    assert abs(float(tanh_log_det(torch.zeros(1, 1)))) < 1e-7
    u = torch.tensor([[0.7]])
    assert math.isclose(float(tanh_log_det(u)), math.log(1 - math.tanh(0.7) ** 2), rel_tol=1e-5)
    a = torch.tanh(u)
    expected = -0.5 * 0.49 - 0.5 * math.log(2 * math.pi) - math.log(1 - math.tanh(0.7) ** 2)
    assert math.isclose(float(tanh_gaussian_log_prob(a, mean, log_std)), expected, rel_tol=1e-4)


def test_state_normalisation_belongs_to_the_config() -> None:
    obs_cfg = ObservationConfig(state_mean=(1.0, 1.0, 1.0, 1.0), state_std=(2.0, 2.0, 2.0, 2.0), image_size=None)
    policy = MLPPolicy(MLPPolicyConfig(state_dim=4, action_dim=2, observation=obs_cfg))
    x = policy.preprocess(np.full((1, 4), 3.0, np.float32), {})
    assert torch.equal(x.state, torch.ones(1, 4))


def test_config_unknown_key_fails() -> None:
    with pytest.raises(ConfigError, match="unknown key 'hiden'"):
        from_mapping(MLPPolicyConfig, {"hiden": [3]}, where="policy")
