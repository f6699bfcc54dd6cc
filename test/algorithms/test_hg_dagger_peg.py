"""HG-DAgger with the scripted expert as the human on the sim peg-insertion task (state): >= 80 % success,
fewer interventions per episode as training goes on."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from test.algorithms import peg
from test.algorithms.ring import RingBuffer
from test.algorithms.scripted_human import InterventionGate
from user.algorithms.bc import BCConfig
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.policies.base import PolicyInput
from user.policies.mlp import MLPPolicy, MLPPolicyConfig

pytest.importorskip("mujoco")
log = logging.getLogger(__name__)

ROUNDS = 10
EPISODES_PER_ROUND = 5
BC_STEPS = 500


def test_hg_dagger_learns_peg_insertion() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    robot, task = peg.make_robot()
    policy = MLPPolicy(MLPPolicyConfig(state_dim=peg.STATE_DIM, action_dim=peg.ACTION_DIM, seed=0))
    algo = HGDagger(policy, HGDaggerConfig(bc=BCConfig(lr=1e-3, batch_size=256)))
    buffer = RingBuffer(50_000, peg.STATE_DIM, peg.ACTION_DIM)

    def act(obs: PolicyInput) -> np.ndarray:
        return policy.act(obs, deterministic=True)

    def train() -> None:
        where = buffer.intervened | buffer.is_demo
        for _ in range(BC_STEPS):
            algo.update(buffer.sample(rng, 256, where=where))

    for seed in range(3):  # a few demonstrations to start from
        assert peg.run(robot, task, peg.expert_actor(robot, task), 10_000 + seed, buffer, is_demo=True).success
    train()
    per_round: list[float] = []
    seed = 0
    for _ in range(ROUNDS):
        counts = []
        for _ in range(EPISODES_PER_ROUND):
            gate = InterventionGate(threshold=0.15, hold=10)
            counts.append(peg.run(robot, task, act, seed, buffer, expert_gate=gate.decide).interventions)
            seed += 1
        per_round.append(float(np.mean(counts)))
        train()
    results = [peg.run(robot, task, act, 20_000 + s) for s in range(20)]
    success = float(np.mean([r.success for r in results]))
    print(f"\nHG-DAgger interventions per episode by round: {per_round}; success without the expert: {success:.2f}")
    log.info("interventions per round %s, success %.2f", per_round, success)
    assert success >= 0.8
    assert per_round[-1] < per_round[0]
