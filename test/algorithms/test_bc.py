"""BC and HG-DAgger: loss by hand, fixed-batch decrease, intervention-only rows, the gate, checkpoints."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from test.algorithms.factories import fixed_batch, through_file
from test.algorithms.scripted_human import InterventionGate
from user.algorithms.base import AlgorithmError, TrainingStats, to_torch
from user.algorithms.bc import BC, BCConfig, bc_loss
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.buffer.batch import TransitionBatch
from user.policies.base import Policy
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _policy() -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=4))


def test_mse_loss_by_hand() -> None:
    policy = _policy()
    with torch.no_grad():  # zero the head: mean 0 -> tanh(mean) = 0
        policy.actor.head.linear.weight.zero_()
        policy.actor.head.linear.bias.zero_()
    obs = policy.preprocess(np.zeros((2, 3), np.float32), {})
    action = torch.tensor([[0.5, -0.5], [1.0, 0.0]])
    loss, _ = bc_loss(policy, obs, action, "mse")
    assert math.isclose(float(loss.detach()), ((0.25 + 0.25) + 1.0) / 2, rel_tol=1e-6)
    with pytest.raises(AssertionError):
        bc_loss(policy, obs, torch.zeros(3, 2), "mse")


@pytest.mark.parametrize("kind", ["mse", "nll"])
def test_bc_loss_decreases_on_a_fixed_batch(kind: str) -> None:
    torch.manual_seed(0)
    bc = BC(_policy(), BCConfig(lr=1e-3, loss=kind))
    batch = fixed_batch(64)
    first = bc.update(batch).losses["bc"]
    for _ in range(200):
        last = bc.update(batch).losses["bc"]
    assert last < first - 0.1 * abs(first)


def test_hg_dagger_trains_on_interventions_only() -> None:
    batch = fixed_batch(30)
    only = HGDagger(_policy(), HGDaggerConfig(use_demos=False))
    assert only.update(batch).info["rows"] == float(batch.intervened.sum())
    both = HGDagger(_policy(), HGDaggerConfig(use_demos=True))
    assert both.update(batch).info["rows"] == float((batch.intervened | batch.is_demo).sum())
    selected = only.select(to_torch(batch, only.policy))
    assert bool(selected.intervened.all())


def test_intervention_gate() -> None:
    gate = InterventionGate(threshold=0.5, hold=2)
    agree, disagree = np.zeros(2, np.float32), np.ones(2, np.float32)
    assert not gate.decide(agree, agree)
    assert gate.decide(agree, disagree)
    assert gate.decide(agree, agree)  # still holding
    assert not gate.decide(agree, agree)


def test_policy_without_imitation_loss_is_refused() -> None:
    class Opaque(Policy):
        def preprocess(self, state, images):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def act_tensor(self, obs, *, deterministic):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def encoder(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    with pytest.raises(AlgorithmError, match="imitation_loss"):
        BC(Opaque(torch.nn.Linear(1, 1), 1))


def test_checkpoint_round_trip_is_bit_exact(tmp_path: Path) -> None:
    a = BC(_policy())
    batch = fixed_batch(32)
    for _ in range(3):
        a.update(batch)
    a.policy.version = 4
    b = BC(MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=99)))
    through_file(a, b, tmp_path / "bc.pt")
    assert (b.policy.version, b.steps) == (4, 3)
    assert a.update(batch) == b.update(batch)
    assert torch.equal(a.policy.get_weights().data, b.policy.get_weights().data)


@pytest.mark.parametrize(("kind", "weight_decay", "clip"), [("mse", 0.0, None), ("nll", 0.1, 0.5), ("mse", 0.0, 0.05)])
def test_updates_are_adam_steps_on_the_imitation_loss(kind: str, weight_decay: float, clip: float | None) -> None:
    config = BCConfig(lr=1e-2, weight_decay=weight_decay, loss=kind, grad_clip=clip)
    bc, reference = BC(_policy(), config), _policy()
    optim = torch.optim.Adam(reference.actor.parameters(), lr=1e-2, weight_decay=weight_decay)
    batch = fixed_batch(16)
    obs = to_torch(batch, reference)
    for step in range(1, 4):
        loss, info = reference.imitation_loss(obs.obs, obs.action, kind)
        stats = bc.update(batch)
        assert dataclasses.astuple(stats) == (step, {"bc": pytest.approx(float(loss.detach()))}, {**info, "rows": 16.0})
        optim.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(list(reference.actor.parameters()), clip)
        optim.step()
        assert torch.allclose(bc.policy.get_weights().data, reference.get_weights().data, atol=1e-6)


@pytest.mark.parametrize("clip", [None, 0.05])
def test_grad_clip_bounds_the_gradient_norm_of_every_step(clip: float | None) -> None:
    bc = BC(_policy(), BCConfig(grad_clip=clip))
    norms: list[float] = []

    def hook(opt: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        grads = [p.grad.norm() for group in opt.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack(grads))))

    bc.optim.register_step_pre_hook(hook)
    for _ in range(2):
        bc.update(fixed_batch(16))
    assert len(norms) == 2
    if clip is None:
        assert min(norms) > 0.1  # the clip below is really active
    else:
        assert max(norms) <= clip * (1 + 1e-4)


def _intervened(batch: TransitionBatch, rows: list[int]) -> TransitionBatch:
    """`batch` with no demos and the human acting in `rows` only."""
    flags = np.zeros(len(batch), bool)
    flags[rows] = True
    return dataclasses.replace(batch, intervened=flags, is_demo=np.zeros(len(batch), bool))


def test_nothing_to_imitate_is_no_step_and_a_single_row_is_one() -> None:
    hg = HGDagger(_policy(), HGDaggerConfig(use_demos=False))
    weights = hg.policy.get_weights().data.clone()
    assert hg.update(_intervened(fixed_batch(8), [])) == TrainingStats(0, {}, {"rows": 0.0})
    assert torch.equal(hg.policy.get_weights().data, weights)
    stats = hg.update(_intervened(fixed_batch(8), [5]))
    assert (stats.updates, stats.info["rows"]) == (1, 1.0)
    assert not torch.equal(hg.policy.get_weights().data, weights)


@pytest.mark.parametrize("use_demos", [False, True])
def test_hg_dagger_imitates_only_the_human_rows(use_demos: bool) -> None:
    batch = fixed_batch(30)
    hg_policy, plain_policy = _policy(), _policy()
    hg, plain = HGDagger(hg_policy, HGDaggerConfig(use_demos=use_demos)), BC(plain_policy)
    obs = to_torch(batch, hg.policy)
    human_rows = obs.select(obs.intervened | obs.is_demo if use_demos else obs.intervened)
    with torch.no_grad():
        human = hg_policy.imitation_loss(human_rows.obs, human_rows.action, "mse")[0]
        every = plain_policy.imitation_loss(obs.obs, obs.action, "mse")[0]
    assert hg.update(batch).losses["bc"] == pytest.approx(float(human))
    assert plain.update(batch).losses["bc"] == pytest.approx(float(every))  # plain BC imitates every row
    assert float(human) != pytest.approx(float(every))
