"""SAC: losses against hand-computed values, shapes, loss decrease on a fixed batch, bit-exact checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.base import AlgorithmError, to_torch
from user.algorithms.sac import SAC, SACConfig, actor_loss, critic_loss, td_target, temperature_loss
from user.config import ConfigError, from_mapping
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _sac(**cfg: object) -> SAC:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    return SAC(policy, from_mapping(SACConfig, {"critic_hidden": [32, 32], **cfg}, where="test"), seed=2)


def test_td_target_by_hand() -> None:
    reward = torch.tensor([1.0, 0.5])
    terminated = torch.tensor([0.0, 1.0])
    next_q = torch.tensor([[2.0, 3.0], [1.0, 4.0]])  # min over members: [1, 3]
    logp = torch.tensor([-1.0, 2.0])
    y = td_target(reward, terminated, next_q, logp, gamma=0.9, alpha=0.5, backup_entropy=True)
    # row 0: 1 + 0.9 * (1 - 0.5 * -1) = 1 + 0.9 * 1.5 = 2.35; row 1: terminated -> 0.5
    assert torch.allclose(y, torch.tensor([2.35, 0.5]))
    y2 = td_target(reward, terminated, next_q, logp, gamma=0.9, alpha=0.5, backup_entropy=False)
    assert torch.allclose(y2, torch.tensor([1.9, 0.5]))


def test_critic_loss_by_hand() -> None:
    q = torch.tensor([[1.0, 2.0], [3.0, 0.0]])
    target = torch.tensor([1.0, 1.0])
    loss, info = critic_loss(q, target)
    assert math.isclose(float(loss), (0 + 1 + 4 + 1) / 4)
    assert math.isclose(info["q_mean"], 1.5)
    with pytest.raises(AssertionError):
        critic_loss(q, torch.zeros(3))


def test_actor_loss_by_hand() -> None:
    q = torch.tensor([[1.0, 4.0], [3.0, 2.0]])
    logp = torch.tensor([0.5, -1.0])
    loss_min, _ = actor_loss(q, logp, 0.2, "min")  # q_pi = [1, 2]
    assert math.isclose(float(loss_min), ((0.1 - 1) + (-0.2 - 2)) / 2, rel_tol=1e-6)
    loss_mean, info = actor_loss(q, logp, 0.2, "mean")  # q_pi = [2, 3]
    assert math.isclose(float(loss_mean), ((0.1 - 2) + (-0.2 - 3)) / 2, rel_tol=1e-6)
    assert math.isclose(info["entropy"], 0.25)


def test_temperature_loss_by_hand() -> None:
    log_alpha = torch.tensor(math.log(2.0), requires_grad=True)
    logp = torch.tensor([1.0, -3.0])
    loss, info = temperature_loss(log_alpha, logp, target_entropy=-1.0)
    # -2 * mean(logp + H) = -2 * mean([0, -4]) = 4
    assert math.isclose(float(loss.detach()), 4.0, rel_tol=1e-6)
    loss.backward()  # type: ignore[no-untyped-call]
    assert log_alpha.grad is not None and float(log_alpha.grad.detach()) > 0  # entropy above target: alpha falls
    assert math.isclose(info["temperature"], 2.0, rel_tol=1e-6)


def test_critic_shapes_and_batch_check() -> None:
    sac = _sac(num_critics=3)
    batch = to_torch(fixed_batch(8), sac.policy)
    assert sac.critic(batch.obs, batch.action).shape == (3, 8)
    with pytest.raises(AlgorithmError):
        sac.update(fixed_batch(8, action_dim=3))


def test_unknown_config_key_fails_loudly() -> None:
    with pytest.raises(ConfigError, match="unknown key 'gama'"):
        from_mapping(SACConfig, {"gama": 0.9}, where="sac")
    with pytest.raises(ConfigError, match="critic_subsample"):
        from_mapping(SACConfig, {"num_critics": 2, "critic_subsample": 3}, where="sac")


def test_defaults_follow_the_paper() -> None:
    cfg = SACConfig()
    assert (cfg.gamma, cfg.tau, cfg.actor_lr, cfg.critic_lr, cfg.batch_size) == (0.96, 0.005, 3e-4, 3e-4, 256)


def test_critic_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    sac = _sac(tau=0.0)  # frozen targets: a plain regression problem
    batch = fixed_batch(64)
    first = sac.update(batch).losses["critic"]
    for _ in range(150):
        last = sac.update(batch).losses["critic"]
    assert last < 0.5 * first


def test_actor_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    sac = _sac(critic_lr=0.0, temperature_lr=0.0)  # fixed critic and temperature: the actor climbs Q
    batch = to_torch(fixed_batch(64), sac.policy)
    first = sac.actor_step(batch)[0]["actor"]
    for _ in range(100):
        last = sac.actor_step(batch)[0]["actor"]
    assert last < first


def test_temperature_is_tuned_unless_its_learning_rate_is_zero() -> None:
    tuned, fixed = _sac(init_temperature=0.5), _sac(init_temperature=0.5, temperature_lr=0.0)
    for _ in range(5):
        tuned.update(fixed_batch(64))
        fixed.update(fixed_batch(64))
    assert tuned.alpha != pytest.approx(0.5, abs=1e-6)
    assert fixed.alpha == pytest.approx(0.5, abs=1e-9)


def test_critic_actor_ratio_and_utd() -> None:
    sac = _sac(utd_ratio=4, critic_actor_ratio=2)
    stats = sac.update(fixed_batch(64))
    assert stats.updates == 4 and sac.critic_steps == 4 and sac.actor_steps == 2


def _state_equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_state_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_state_equal, a, b))
    return a == b


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    sac = _sac(critic_subsample=1)
    batch = fixed_batch(32)
    for _ in range(3):
        sac.update(batch)
    sac.save(tmp_path / "ckpt.pt")
    other = _sac(critic_subsample=1)
    other.load(tmp_path / "ckpt.pt")
    assert _state_equal(sac.state_dict(), other.state_dict())
    assert torch.equal(sac.policy.get_weights().data, other.policy.get_weights().data)
    torch.manual_seed(5)
    a = sac.update(batch)
    torch.manual_seed(5)
    b = other.update(batch)
    assert a == b
    assert _state_equal(sac.state_dict(), other.state_dict())
