"""BC and HG-DAgger: loss by hand, fixed-batch decrease, intervention-only rows, the gate, checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.base import AlgorithmError, to_torch
from user.algorithms.bc import BC, BCConfig, bc_loss
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig, InterventionGate
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
    a.save(tmp_path / "bc.pt")
    b = BC(MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32), seed=99)))
    b.load(tmp_path / "bc.pt")
    assert a.update(batch) == b.update(batch)
    assert torch.equal(a.policy.get_weights().data, b.policy.get_weights().data)
