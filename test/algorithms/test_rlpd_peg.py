"""RLPD with 20 scripted-expert demos on the sim peg-insertion task (state): >= 80 % success.

The episode is scored as the live pipeline scores it (peg.run): observation = `arm.vector()` + the task's
`observation_extras` (`tool_to_hole` x50), reward = the task's reward (a cost -tanh(d / 0.05) <= 0),
success terminal, applied (safety-filtered) actions stored; the robot runs with the action restriction of
`peg.SAFETY` (gripper held closed, tool within 0.1 rad of straight down, tool target above z = 0.105 m).

Status (measured on 2026-11-30, `OMP_NUM_THREADS=1 MUJOCO_GL=egl .venv/bin/python -m pytest -m slow -s
test/algorithms/test_rlpd_peg.py`, 2 shared cores): it still FAILS. Success of the deterministic policy was
0.00 at every evaluation from 1k to 19k env steps, 0.00 over the final 20 episodes (29.5 min; exploration
episodes ran to the 100-step limit). The earlier run (before these changes) stayed at 0.0 up to 20k steps,
0.05 final.
Found and fixed on the way: the task's positive dense reward with success-termination (pays for hovering),
init temperature 1.0 (the critic learnt the entropy bonus, Q ~ 30 after 600 steps), random gripper and
roll/pitch exploration dropping the peg, and soft MuJoCo contacts through which a learned policy "inserted"
the peg by pushing it 10-20 mm into the fixture wall (0.9 "success" at 500 steps; now stiff contacts, and
that policy fails). Still open: offline on the 20 demos alone the actor does not come near the demo actions
(squared error 1.3 after 3000 updates), and online it never finds the 0.5 mm alignment. Issue 5 stays open.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
import torch

from test.algorithms import peg
from test.algorithms.ring import RingBuffer
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.policies.base import PolicyInput
from user.policies.mlp import MLPPolicy, MLPPolicyConfig

pytest.importorskip("mujoco")

DEMOS = 20
MAX_ENV_STEPS = 20_000
EVAL_EVERY = 10  # episodes
EVAL_EPISODES = 20  # deterministic episodes per evaluation
CONFIRM_EPISODES = 40  # fresh episodes that must confirm a passing evaluation


def evaluate(robot: Any, task: Any, actor: peg.Actor, first_seed: int, n: int) -> float:
    return float(np.mean([peg.run(robot, task, actor, first_seed + s).success for s in range(n)]))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_rlpd_learns_peg_insertion_from_demos() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    robot, task = peg.make_robot()
    policy = MLPPolicy(MLPPolicyConfig(state_dim=peg.STATE_DIM, action_dim=peg.ACTION_DIM, seed=0))
    config = RLPDConfig(utd_ratio=4, critic_actor_ratio=4, init_temperature=0.01, temperature_lr=0.0)
    rlpd = RLPD(policy, config, seed=0)
    demos = RingBuffer(10_000, peg.STATE_DIM, peg.ACTION_DIM)
    online = RingBuffer(MAX_ENV_STEPS, peg.STATE_DIM, peg.ACTION_DIM)
    for seed in range(DEMOS):
        assert peg.run(robot, task, peg.expert_actor(robot, task), 10_000 + seed, demos, is_demo=True).success
    n_online, n_demo = config.split_batch()

    def learn() -> None:
        if online.size >= n_online:
            rlpd.update_mixed(online.sample(rng, n_online), demos.sample(rng, n_demo))

    def explore(obs: PolicyInput) -> np.ndarray:
        return policy.act(obs)

    def exploit(obs: PolicyInput) -> np.ndarray:
        return policy.act(obs, deterministic=True)

    curve: list[tuple[int, float]] = []
    start = time.monotonic()
    episode = evaluations = 0
    confirmed: float | None = None
    while online.size < MAX_ENV_STEPS - task.max_steps:
        peg.run(robot, task, explore, episode, online, on_step=learn)
        episode += 1
        if episode % EVAL_EVERY:
            continue
        evaluations += 1
        rate = evaluate(robot, task, exploit, 30_000 + 1000 * evaluations, EVAL_EPISODES)
        curve.append((online.size, rate))
        print(f"env steps {online.size}: success {rate:.2f} ({time.monotonic() - start:.0f} s)", flush=True)
        if rate >= 0.8:  # confirmed on fresh episodes, or training goes on
            confirmed = evaluate(robot, task, exploit, 90_000 + 1000 * evaluations, CONFIRM_EPISODES)
            print(f"  confirmation over {CONFIRM_EPISODES} fresh episodes: {confirmed:.2f}", flush=True)
            if confirmed >= 0.8:
                break
    print(f"\nRLPD success curve (env steps, success): {curve}; confirmation {confirmed}")
    assert confirmed is not None and confirmed >= 0.8
