"""SAC-Flow: log pi is the flow's path likelihood, losses fall on a fixed batch, BC term, bit-exact checkpoints."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from test.algorithms.factories import fixed_batch, through_file
from test.algorithms.test_sac import _state_equal
from test.distributed.test_batch_share import run_ranks
from user.algorithms.base import AlgorithmError, to_torch
from user.algorithms.critics import EnsembleLinear
from user.algorithms.sac_flow import SACFlow, SACFlowConfig
from user.config import ConfigError, from_mapping
from user.policies.base import TensorObs
from user.policies.flow import FlowPolicy, FlowPolicyConfig


def _policy(**cfg: object) -> FlowPolicy:
    base: dict[str, object] = {"state_dim": 3, "action_dim": 2, "hidden": [32, 32], "steps": 3, "seed": 1}
    return FlowPolicy(from_mapping(FlowPolicyConfig, {**base, **cfg}, where="test"))


def _sac_flow(policy: FlowPolicy | None = None, **cfg: object) -> SACFlow:
    config = from_mapping(SACFlowConfig, {"critic_hidden": [32, 32], **cfg}, where="test")
    return SACFlow(policy or _policy(), config, seed=2)


def test_td_target_uses_the_flow_path_likelihood() -> None:
    # a constant-velocity flow with fixed noise: log pi(a'|s') is known, so the TD target is too
    policy = _policy(steps=1, squash="clip", noise_log_std_min=0.0, noise_log_std_max=0.0)
    with torch.no_grad():
        policy.actor.velocity.out.weight.zero_()
        policy.actor.velocity.out.bias.zero_()
    sac = _sac_flow(policy, gamma=0.5, init_temperature=2.0, critic_lr=0.0, tau=0.0)
    out = sac.target_critic.net[-1]
    assert isinstance(out, EnsembleLinear)
    with torch.no_grad():
        out.weight.zero_()  # target Q = 0 everywhere
        out.bias.zero_()
    batch = to_torch(fixed_batch(4), policy)
    torch.manual_seed(0)
    _, info = sac.critic_step(batch)
    torch.manual_seed(0)
    torch.randn(4, 2)  # x_0, drawn first; one step: x_1 = x_0 + 0 + 1 * eps, log pi = sum log N(eps; 0, 1)
    eps = torch.randn(4, 2)
    log_pi = (-0.5 * eps.pow(2) - 0.5 * math.log(2 * math.pi)).sum(-1)
    target = batch.reward + 0.5 * (1 - batch.terminated) * (-2.0 * log_pi)
    assert math.isclose(info["target_mean"], float(target.mean()), rel_tol=1e-5)


def test_critic_loss_decreases_on_a_fixed_batch() -> None:
    torch.manual_seed(0)
    sac = _sac_flow(tau=0.0, critic_lr=1e-3)
    batch = fixed_batch(64)
    first = sac.update(batch).losses["critic"]
    for _ in range(100):
        last = sac.update(batch).losses["critic"]
    assert last < 0.5 * first


def test_actor_loss_decreases_with_a_fixed_critic() -> None:
    torch.manual_seed(0)
    sac = _sac_flow(critic_lr=0.0, temperature_lr=0.0, actor_lr=1e-3)
    batch = to_torch(fixed_batch(64), sac.policy)
    first = np.mean([sac.actor_step(batch)[0]["actor"] for _ in range(5)])
    for _ in range(100):
        sac.actor_step(batch)
    last = np.mean([sac.actor_step(batch)[0]["actor"] for _ in range(5)])
    assert last < first


def test_bc_term_only_when_weighted_and_on_demos() -> None:
    batch = to_torch(fixed_batch(16), _policy())
    assert "bc" not in _sac_flow().actor_step(batch)[0]
    losses, info = _sac_flow(bc_weight=1.0).actor_step(batch)
    assert losses["bc"] > 0 and "flow_mse" in info
    no_demos = batch.select(~batch.is_demo)
    assert "bc" not in _sac_flow(bc_weight=1.0).actor_step(no_demos)[0]


def test_ratios_shapes_and_batch_check() -> None:
    sac = _sac_flow(utd_ratio=4, critic_actor_ratio=2, num_critics=3)
    stats = sac.update(fixed_batch(64))
    assert stats.updates == 4 and sac.critic_steps == 4 and sac.actor_steps == 2
    batch = to_torch(fixed_batch(8), sac.policy)
    assert sac.critic(batch.obs, batch.action).shape == (3, 8)
    with pytest.raises(AlgorithmError):
        sac.update(fixed_batch(8, action_dim=3))
    with pytest.raises(AlgorithmError, match="utd_ratio"):
        sac.update(fixed_batch(2))


def test_unknown_config_key_fails_loudly() -> None:
    with pytest.raises(ConfigError, match="unknown key 'bc_wieght'"):
        from_mapping(SACFlowConfig, {"bc_wieght": 1.0}, where="sac_flow")


def test_drq_reaches_the_critic_only_when_asked() -> None:
    enc = {"channels": [8], "blocks": [1], "stem_channels": 8, "groups": 2, "spatial_features": 1, "bottleneck": 4}
    batch = fixed_batch(4, images={"wrist": (16, 16)})
    seen: dict[str, list[torch.Tensor]] = {"none": [], "drq": []}
    for augmentation, record in seen.items():
        policy = _policy(observation={"cameras": ["wrist"], "image_size": 16}, encoder=enc)
        sac = _sac_flow(policy, augmentation=augmentation, drq_pad=2)

        def hook(_: object, args: tuple[TensorObs], record: list[torch.Tensor] = record) -> None:
            record.append(args[0].images["wrist"].clone())

        sac.critic.encoder.register_forward_pre_hook(hook)
        sac.update(batch)
    raw = to_torch(batch, _policy(observation={"cameras": ["wrist"], "image_size": 16}, encoder=enc)).obs
    assert len(seen["none"]) == len(seen["drq"]) == 2
    assert all(torch.equal(x, raw.images["wrist"]) for x in seen["none"])
    assert all(not torch.equal(x, raw.images["wrist"]) for x in seen["drq"])


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    sac = _sac_flow(bc_weight=0.5)
    batch = fixed_batch(32)
    for _ in range(3):
        sac.update(batch)
    other = _sac_flow(bc_weight=0.5)
    through_file(sac, other, tmp_path / "ckpt.pt")
    assert _state_equal(sac.state_dict(), other.state_dict())
    assert torch.equal(sac.policy.get_weights().data, other.policy.get_weights().data)
    torch.manual_seed(5)
    a = sac.update(batch)
    torch.manual_seed(5)
    b = other.update(batch)
    assert a == b
    assert _state_equal(sac.state_dict(), other.state_dict())


def _trained_on_ranks(tmp_path: Path, nproc: int) -> list[dict[str, Any]]:
    out = tmp_path / f"world{nproc}"
    out.mkdir()
    done = run_ranks(out, "test.algorithms.sac_flow_ranks_worker", nproc=nproc, args=(str(out),))
    assert done.returncode == 0, done.stderr[-3000:]
    return [torch.load(out / f"rank{r}.pt") for r in range(nproc)]


@pytest.mark.timeout(300)
def test_the_bc_term_trains_on_two_ranks_as_in_one_process(tmp_path: Path) -> None:
    """Every demonstration row on one rank, none on the other: the BC term, its figures and the weights after 3
    updates are one process's (each rank weighs its demonstration rows by its share of them)."""
    (alone,) = _trained_on_ranks(tmp_path, 1)
    assert all(step["bc"] > 0 for step in alone["losses"])  # the term took part
    for rank in _trained_on_ranks(tmp_path, 2):
        for got, want in zip(rank["losses"] + rank["info"], alone["losses"] + alone["info"], strict=True):
            assert got.keys() == want.keys()
            for key in want:
                assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-6), key
        for key, value in alone["weights"].items():
            torch.testing.assert_close(rank["weights"][key], value, rtol=1e-4, atol=1e-6, msg=key)
