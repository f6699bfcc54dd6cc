"""RLPD: batched LayerNorm ensemble, REDQ subsample, demo/online mixing, ratios, fixed-batch decrease, checkpoints."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from test.algorithms.factories import fixed_batch, spy_critic_steps, through_file
from user.algorithms.base import to_torch
from user.algorithms.critics import EnsembleLayerNorm, EnsembleLinear, EnsembleQ
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.buffer.batch import BatchError, TransitionBatch
from user.buffer.config import SamplerConfig
from user.config import ConfigError, from_mapping
from user.policies.mlp import MLPPolicy, MLPPolicyConfig, StateEncoder


def _rlpd(**cfg: object) -> RLPD:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    return RLPD(policy, from_mapping(RLPDConfig, {"critic_hidden": [32, 32], **cfg}, where="test"), seed=3)


def test_defaults_are_the_published_ones() -> None:
    """Ball et al. 2023 and their code (ikostrikov/rlpd) at its update-to-data ratio of 1."""
    cfg = RLPDConfig()
    assert (cfg.num_critics, cfg.critic_subsample, cfg.critic_layer_norm, cfg.actor_q) == (10, 2, True, "mean")
    assert (cfg.batch_size, cfg.demo_ratio, cfg.utd_ratio, cfg.critic_actor_ratio) == (256, 0.5, 1, 1)
    assert (cfg.gamma, cfg.tau, cfg.init_temperature, cfg.backup_entropy) == (0.99, 0.005, 1.0, True)
    assert (cfg.actor_lr, cfg.critic_lr, cfg.temperature_lr, cfg.critic_hidden) == (3e-4, 3e-4, 3e-4, (256, 256))
    assert cfg.entropy_target(7) == -3.5  # -dim(A) / 2
    assert RLPDConfig(target_entropy=-7.0).entropy_target(7) == -7.0
    assert _rlpd().target_entropy == -1.0  # two action dimensions
    assert _rlpd(target_entropy=-0.25).target_entropy == -0.25
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
    values[1].sum().backward()
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
    mixed = TransitionBatch.concat([online, demo])
    assert len(mixed) == 32
    stats = rlpd.update(mixed)
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
    b = _rlpd(num_critics=4)
    through_file(a, b, tmp_path / "rlpd.pt")
    torch.manual_seed(9)
    sa = a.update(batch)
    torch.manual_seed(9)
    sb = b.update(batch)
    assert sa == sb
    for (ka, va), (kb, vb) in zip(a.critic.state_dict().items(), b.critic.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert torch.equal(a.policy.get_weights().data, b.policy.get_weights().data)


def test_every_rlpd_setting_reaches_the_sac_that_runs_it() -> None:
    cfg = RLPDConfig(
        gamma=0.9,
        tau=0.02,
        actor_lr=1e-3,
        critic_lr=2e-3,
        temperature_lr=5e-4,
        batch_size=32,
        num_critics=6,
        critic_subsample=3,
        critic_hidden=(8,),
        critic_layer_norm=False,
        actor_q="min",
        init_temperature=0.3,
        target_entropy=-1.5,
        backup_entropy=False,
        utd_ratio=2,
        critic_actor_ratio=3,
        augmentation="drq",
        drq_pad=2,
        grad_clip=5.0,
        demo_ratio=0.25,
    )
    assert isinstance(cfg, SACConfig)  # RLPD's settings are SAC's, plus the demo share of a batch
    assert [f.name for f in dataclasses.fields(RLPDConfig)] == [
        *(f.name for f in dataclasses.fields(SACConfig)),
        "demo_ratio",
    ]
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,), seed=1))
    rlpd = RLPD(policy, cfg)
    assert rlpd.config is cfg
    assert not any(isinstance(m, EnsembleLayerNorm) for m in rlpd.critic.modules())  # layer norm: settable now
    assert isinstance(RLPD(policy).config, RLPDConfig)
    assert any(isinstance(m, EnsembleLayerNorm) for m in RLPD(policy).critic.modules())


def test_rlpd_changes_only_these_sac_defaults_and_bounds() -> None:
    sac, rlpd = SACConfig(), RLPDConfig()
    changed = {
        f.name: (getattr(sac, f.name), getattr(rlpd, f.name))
        for f in dataclasses.fields(SACConfig)
        if getattr(sac, f.name) != getattr(rlpd, f.name)
    }
    assert changed == {
        "num_critics": (2, 10),
        "critic_subsample": (None, 2),
        "critic_layer_norm": (False, True),
        "actor_q": ("min", "mean"),
    }
    assert (sac.entropy_target(4), rlpd.entropy_target(4)) == (-4.0, -2.0)  # and the target entropy's rule
    assert from_mapping(SACConfig, {"batch_size": 1, "num_critics": 1}, where="sac").batch_size == 1
    with pytest.raises(ConfigError, match=r"batch_size: 1 is below the minimum 2"):
        from_mapping(RLPDConfig, {"batch_size": 1}, where="rlpd")
    with pytest.raises(ConfigError, match=r"num_critics: 1 is below the minimum 2"):
        from_mapping(RLPDConfig, {"num_critics": 1, "critic_subsample": 1}, where="rlpd")
    with pytest.raises(ConfigError, match="critic_subsample"):
        from_mapping(RLPDConfig, {"critic_subsample": None}, where="rlpd")  # RLPD always subsamples
    with pytest.raises(ValueError, match=r"critic_subsample must be in 1\.\.num_critics"):
        RLPDConfig(critic_subsample=0)  # SAC's own check still applies


def test_subsample_may_equal_but_not_exceed_the_ensemble() -> None:
    assert RLPDConfig(num_critics=3, critic_subsample=3).critic_subsample == 3
    with pytest.raises(ValueError, match=r"critic_subsample \(4\) exceeds num_critics \(3\)"):
        RLPDConfig(num_critics=3, critic_subsample=4)


def _kinds(online: int, demo: int, images: dict[str, tuple[int, int]] | None = None) -> tuple[TransitionBatch, ...]:
    """An online batch and a demo batch with distinct indices, flags and versions."""
    a, b = fixed_batch(online, seed=1, images=images), fixed_batch(demo, seed=2, images=images)
    a = dataclasses.replace(a, is_demo=np.zeros(online, bool), policy_version=np.full(online, 3))
    b = dataclasses.replace(b, indices=b.indices + 100, is_demo=np.ones(demo, bool), truncated=np.ones(demo, bool))
    return a, dataclasses.replace(b, success=np.arange(demo) % 2 == 0)


def _fields(batch: TransitionBatch) -> dict[str, np.ndarray]:
    """Every per-row array of the batch by name (each camera's images too): every field but the state names (and
    the action chunks, which a batch without them does not carry)."""
    others = ("images", "next_images", "state_names")
    out = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch) if f.name not in others}
    out = {name: value for name, value in out.items() if value is not None}
    out.update({f"images.{k}": v for k, v in batch.images.items()})
    out.update({f"next_images.{k}": v for k, v in batch.next_images.items()})
    return out


def test_mixing_and_shuffling_keep_every_transition_together() -> None:
    online, demo = _kinds(5, 3, images={"wrist": (4, 4)})
    mixed = TransitionBatch.concat([online, demo])
    a, b, m = _fields(online), _fields(demo), _fields(mixed)
    assert m.keys() == a.keys() and len(m) == 13
    for name, value in m.items():
        assert np.array_equal(value, np.concatenate([a[name], b[name]])), name
    order = np.array([7, 0, 3, 5, 1, 6, 2, 4])
    shuffled = _fields(mixed.take(order))
    assert shuffled.keys() == m.keys()
    for name, value in shuffled.items():
        assert np.array_equal(value, m[name][order]), name


def test_batches_with_different_cameras_are_not_mixed() -> None:
    online, demo = fixed_batch(4, images={"wrist": (4, 4)}), fixed_batch(4, images={"front": (4, 4)})
    with pytest.raises(BatchError, match=r"cannot mix batches with cameras \['wrist'\] and \['front'\]"):
        TransitionBatch.concat([online, demo])


def test_update_shuffles_the_mix_so_every_critic_step_sees_demos_and_online_rows() -> None:
    online, demo = _kinds(16, 16)
    rlpd, again = _rlpd(utd_ratio=4, num_critics=2), _rlpd(utd_ratio=4, num_critics=2)
    seen, seen_again = spy_critic_steps(rlpd), spy_critic_steps(again)
    for _ in range(2):
        stats = rlpd.update(TransitionBatch.concat([online, demo]))
        again.update(TransitionBatch.concat([online, demo]))
    assert stats.updates == 8 and stats.info["demo_fraction"] == 0.5
    assert all(0 < int(s.is_demo.sum()) < len(s) for s in seen)  # both kinds in every slice
    rewards = np.concatenate([online.reward, demo.reward])
    first, second = (torch.cat([s.reward for s in seen[k : k + 4]]).numpy() for k in (0, 4))
    assert sorted(first) == sorted(rewards) and sorted(second) == sorted(rewards)  # every row once per update
    assert not np.array_equal(first, second)  # a new order each update ...
    assert all(torch.equal(x.reward, y.reward) for x, y in zip(seen, seen_again, strict=True))  # ... reproducibly


def test_the_seed_reaches_the_sac_that_runs_it() -> None:
    """RLPD draws its critics and targets from SAC's seeded generators: seed 0 unless given."""
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,), seed=1))
    cfg = RLPDConfig(num_critics=2, critic_hidden=(8,))

    def critic(algorithm: SAC) -> list[torch.Tensor]:
        return list(algorithm.critic.state_dict().values())

    for seed, rlpd in ((0, RLPD(policy, cfg)), (3, RLPD(policy, cfg, seed=3))):
        same = SAC(policy, cfg, seed=seed)
        assert all(torch.equal(a, b) for a, b in zip(critic(rlpd), critic(same), strict=True)), seed
        assert rlpd.generator.get_state().equal(same.generator.get_state())
    assert not torch.equal(critic(RLPD(policy, cfg, seed=3))[0], critic(RLPD(policy, cfg))[0])


def test_its_settings_build_it_and_mix_demonstrations_into_every_batch() -> None:
    settings = {"critic_hidden": [32, 32], "batch_size": 64, "utd_ratio": 4, "demo_ratio": 0.25}
    config = from_mapping(RLPDConfig, settings, where="test")
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=1))
    rlpd = config.build(policy, seed=3)
    assert type(rlpd) is RLPD and rlpd.policy is policy and rlpd.config is config
    assert torch.equal(rlpd.generator.get_state(), torch.Generator().manual_seed(3).get_state())  # its seed
    assert (config.rows_per_update(), config.gradient_steps_per_update()) == (64, 4)
    sampler = config.auto_sampler(SamplerConfig(seed=5))
    assert (sampler.kind, sampler.demo_ratio, sampler.seed) == ("demo_ratio", 0.25, 5)
