"""Target critics of SAC and RLPD: the Polyak average at the configured rate, the TD target the critic regresses
on (target critics, gamma, termination, entropy backup), and the min over (a random subset of) target members."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import pytest
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.base import TorchBatch, to_torch
from user.algorithms.critics import EnsembleLinear
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _policy() -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(16, 16), seed=1))


def _sac(**cfg: object) -> SAC:
    return SAC(_policy(), SACConfig(critic_hidden=(16, 16), **cfg), seed=2)  # type: ignore[arg-type]


def _rlpd(**cfg: object) -> RLPD:
    settings: dict[str, object] = {"num_critics": 4, "critic_subsample": 2, "critic_actor_ratio": 1, **cfg}
    return RLPD(_policy(), RLPDConfig(critic_hidden=(16, 16), **settings), seed=3)  # type: ignore[arg-type]


LEARNERS: dict[str, Callable[..., SAC]] = {"sac": _sac, "rlpd": _rlpd}


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_targets_start_as_a_separate_frozen_copy_of_the_critic(learner: str) -> None:
    algo = LEARNERS[learner]()
    pairs = list(zip(algo.target_critic.parameters(), algo.critic.parameters(), strict=True))
    assert all(torch.equal(t, c) and t.data_ptr() != c.data_ptr() for t, c in pairs)
    assert not any(t.requires_grad for t, _ in pairs)


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_target_critics_track_the_critic_at_the_configured_rate(learner: str) -> None:
    tau = 0.3
    algo = LEARNERS[learner](tau=tau, critic_lr=1e-2)
    batch = fixed_batch(16)
    for _ in range(3):  # after each critic step: target <- (1 - tau) target + tau critic
        before = _params(algo.target_critic)
        algo.update(batch)
        for old, t, c in zip(before, algo.target_critic.parameters(), algo.critic.parameters(), strict=True):
            assert torch.allclose(t, (1 - tau) * old + tau * c, atol=1e-6)
        assert not all(torch.equal(old, t) for old, t in zip(before, algo.target_critic.parameters(), strict=True))


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_tau_one_copies_the_critic_and_tau_zero_freezes_the_targets(learner: str) -> None:
    copying, frozen = LEARNERS[learner](tau=1.0), LEARNERS[learner](tau=0.0)
    initial = _params(frozen.target_critic)
    for _ in range(2):
        copying.update(fixed_batch(16))
        frozen.update(fixed_batch(16))
    for t, c in zip(copying.target_critic.parameters(), copying.critic.parameters(), strict=True):
        assert torch.allclose(t, c, atol=1e-7)
    assert all(torch.equal(a, b) for a, b in zip(initial, frozen.target_critic.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(initial, frozen.critic.parameters(), strict=True))


def _terminated_half(batch: TorchBatch) -> TorchBatch:
    terminated = (torch.arange(len(batch)) % 2 == 0).float()
    return dataclasses.replace(batch, terminated=terminated)


@pytest.mark.parametrize("backup_entropy", [True, False])
def test_critic_regresses_on_the_td_target_of_the_target_critics(backup_entropy: bool) -> None:
    gamma, alpha = 0.8, 0.7
    sac = _sac(tau=0.5, gamma=gamma, init_temperature=alpha, backup_entropy=backup_entropy, num_critics=3)
    for _ in range(3):  # the targets now lag the critic: using the critic itself would show
        sac.update(fixed_batch(16, seed=5))
    batch = _terminated_half(to_torch(fixed_batch(8), sac.policy))
    alpha = sac.alpha
    torch.manual_seed(11)
    with torch.no_grad():
        next_action, next_log_prob = sac.policy.sample(batch.next_obs)
        soft = sac.target_critic(batch.next_obs, next_action).min(dim=0).values
        if backup_entropy:
            soft = soft - alpha * next_log_prob
        y = batch.reward + gamma * (1 - batch.terminated) * soft
        expected = (sac.critic(batch.obs, batch.action) - y).pow(2).mean()
    torch.manual_seed(11)
    loss, info = sac.critic_step(batch)
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert info["target_mean"] == pytest.approx(float(y.mean()), rel=1e-5, abs=1e-6)


MEMBER_VALUES = (5.0, 1.0, 4.0, 2.0, 3.0)  # constant Q of each target member


def _targets_seen(algo: SAC, steps: int) -> list[float]:
    """TD targets (per unit of gamma) of `steps` critic steps, with target member n's Q fixed at MEMBER_VALUES[n]."""
    last = algo.target_critic.net[-1]
    assert isinstance(last, EnsembleLinear)
    with torch.no_grad():
        last.weight.zero_()
        last.bias.copy_(torch.tensor(MEMBER_VALUES).view(-1, 1, 1))
    batch = to_torch(fixed_batch(4), algo.policy)
    batch = dataclasses.replace(batch, reward=torch.zeros(4), terminated=torch.zeros(4))
    return [round(algo.critic_step(batch)[1]["target_mean"] / algo.config.gamma, 4) for _ in range(steps)]


def test_rlpd_target_is_the_min_over_exactly_subsample_random_members() -> None:
    rlpd = _rlpd(num_critics=5, critic_subsample=2, tau=0.0, gamma=0.5, backup_entropy=False)
    seen = _targets_seen(rlpd, 60)
    # the min of a random pair of {1..5}: 1 (4 pairs in 10), 2 (3), 3 (2), 4 (1); never 5 (one member), and 4
    # only when no third member takes part
    assert set(seen) == {1.0, 2.0, 3.0, 4.0}
    assert 0.2 < seen.count(1.0) / len(seen) < 0.6
    assert sum(a != b for a, b in itertools.pairwise(seen)) > len(seen) // 3  # redrawn every step


@pytest.mark.parametrize("subsample", [None, 5])
def test_sac_target_is_the_min_over_all_members(subsample: int | None) -> None:
    sac = _sac(num_critics=5, critic_subsample=subsample, tau=0.0, gamma=0.5, backup_entropy=False)
    assert sorted(sac.target_members().tolist()) == [0, 1, 2, 3, 4]
    assert set(_targets_seen(sac, 5)) == {1.0}
