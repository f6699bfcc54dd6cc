"""RLPD: batched LayerNorm ensemble, REDQ subsample, demo/online mixing, ratios, fixed-batch decrease, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.base import to_torch
from user.algorithms.critics import EnsembleLayerNorm, EnsembleLinear, EnsembleQ
from user.algorithms.rlpd import RLPD, RLPDConfig, concat_batches
from user.config import ConfigError, from_mapping
from user.policies.mlp import MLPPolicy, MLPPolicyConfig, StateEncoder


def _rlpd(**cfg: object) -> RLPD:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    return RLPD(policy, from_mapping(RLPDConfig, {"critic_hidden": [32, 32], **cfg}, where="test"), seed=3)


def test_defaults_follow_the_paper() -> None:
    cfg = RLPDConfig()
    assert (cfg.num_critics, cfg.critic_subsample, cfg.critic_actor_ratio, cfg.batch_size) == (10, 2, 4, 256)
    assert (cfg.gamma, cfg.tau, cfg.actor_lr) == (0.96, 0.005, 3e-4)
    assert cfg.split_batch() == (128, 128)
    with pytest.raises(ConfigError, match="critic_subsample"):
        from_mapping(RLPDConfig, {"num_critics": 2, "critic_subsample": 3}, where="rlpd")


def test_ensemble_linear_matches_separate_layers() -> None:
    torch.manual_seed(0)
    layer = EnsembleLinear(3, 4, 5)
    x = torch.randn(3, 7, 4)
    out = layer(x)
    assert out.shape == (3, 7, 5)
    for n in range(3):
        assert torch.allclose(out[n], x[n] @ layer.weight[n] + layer.bias[n], atol=1e-6)


def test_ensemble_layer_norm_has_per_member_affine() -> None:
    norm = EnsembleLayerNorm(2, 4)
    with torch.no_grad():
        norm.weight[1].fill_(2.0)
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]], [[1.0, 2.0, 3.0, 4.0]]])
    y = norm(x)
    expected = (x[0, 0] - 2.5) / torch.sqrt(torch.tensor(1.25 + 1e-5))
    assert torch.allclose(y[0, 0], expected, atol=1e-5) and torch.allclose(y[1, 0], 2 * expected, atol=1e-5)


def test_members_are_independent() -> None:
    torch.manual_seed(0)
    q = EnsembleQ(StateEncoder(3), 3, 2, members=4, hidden=(8,), layer_norm=True)
    obs = to_torch(fixed_batch(5), _rlpd().policy)
    values = q(obs.obs, obs.action)
    assert values.shape == (4, 5)
    values[1].sum().backward()  # type: ignore[no-untyped-call]
    first = q.net[0]
    assert isinstance(first, EnsembleLinear) and first.weight.grad is not None
    grads = first.weight.grad.abs().sum(dim=(1, 2))
    assert grads[1] > 0 and float(grads[0] + grads[2] + grads[3]) == 0.0


def test_target_uses_a_random_subset_of_members() -> None:
    rlpd = _rlpd(num_critics=10, critic_subsample=2)
    draws = [tuple(rlpd.target_members().tolist()) for _ in range(20)]
    assert all(len(d) == 2 and len(set(d)) == 2 for d in draws)
    assert len(set(draws)) > 5


def test_critic_actor_ratio() -> None:
    rlpd = _rlpd(utd_ratio=8, critic_actor_ratio=4)
    rlpd.update(fixed_batch(64))
    assert (rlpd.critic_steps, rlpd.actor_steps) == (8, 2)


def test_mixed_batches_report_their_demo_fraction() -> None:
    rlpd = _rlpd()
    online, demo = fixed_batch(24, seed=1), fixed_batch(8, seed=2)
    online = type(online)(**{**online.__dict__, "is_demo": online.is_demo & False})
    demo = type(demo)(**{**demo.__dict__, "is_demo": demo.is_demo | True})
    mixed = concat_batches(online, demo)
    assert len(mixed) == 32
    stats = rlpd.update_mixed(online, demo)
    assert stats.info["demo_fraction"] == 0.25


def test_critic_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    rlpd = _rlpd(tau=0.0, num_critics=4)
    batch = fixed_batch(64)
    first = rlpd.update(batch).losses["critic"]
    for _ in range(100):
        last = rlpd.update(batch).losses["critic"]
    assert last < 0.5 * first


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    a = _rlpd(num_critics=4)
    batch = fixed_batch(32)
    for _ in range(5):
        a.update(batch)
    a.save(tmp_path / "rlpd.pt")
    b = _rlpd(num_critics=4)
    b.load(tmp_path / "rlpd.pt")
    torch.manual_seed(9)
    sa = a.update(batch)
    torch.manual_seed(9)
    sb = b.update(batch)
    assert sa == sb
    for (ka, va), (kb, vb) in zip(a.critic.state_dict().items(), b.critic.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert torch.equal(a.policy.get_weights().data, b.policy.get_weights().data)
