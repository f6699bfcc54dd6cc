"""RLPD with 20 scripted-expert demos on the sim peg-insertion task (state): >= 80 % success.

The episode is scored as the live pipeline scores it (peg.run): observation = `arm.vector()` + the task's
`observation_extras` (`tool_to_hole` x50), reward = the task's reward (a cost -tanh(d / 0.05) <= 0),
success terminal, the chosen action stored (as `ControlLoop` records it); the robot runs with the action
restriction of `peg.SAFETY` (gripper held closed, tool within 0.05 rad of straight down, tool target above
z = 0.105 m). RLPD as the paper's table has it (10 LayerNorm critics, subsample 2, utd 4, critic:actor 4,
batch 256 half demos), with a fixed entropy temperature of 0.01. The deterministic policy is evaluated on
20 episodes every 10 training episodes; an evaluation at >= 0.8 must be confirmed on 40 fresh episodes.

Measured on 2026-12-01 (`OMP_NUM_THREADS=1 MUJOCO_GL=egl .venv/bin/python -m pytest -m slow -s
test/algorithms/test_rlpd_peg.py`, 2 shared cores, 630 s): passes. Curve (env steps: success over 20):
821: 0.30, 1733: 1.00 (confirmation 0.78), 2681: 0.10, 3879: 0.30, 5216: 0.35, 6234: 0.70, 7618: 0.80
(0.78), 8270: 0.80 (0.78), 9541: 0.95, confirmed 0.85 over 40 fresh episodes.
What made it learn (each found by a run that failed without it): a 4 mm 45-degree bevel on the hole (with a
sharp rim no run got past 0.05), storing the action the policy chose rather than the safety filter's output
(the critic had never seen the actions the actor emitted for the pinned gripper and limited tilt: success
collapsed to 0.0-0.4 after early peaks), a fixed temperature (tuned to the target entropy -7 it grew from
0.01 to 0.09 within 9k steps and success fell with it), and a 0.05 rad tilt limit (the policy drove the tilt
to the 0.1 rad limit, where the peg jams 16 mm down). Success still swings between evaluations (0.1-1.0
before 6k steps); a later evaluation can fall below 0.8 again.
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
from user.buffer.batch import TransitionBatch
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
    config = RLPDConfig(  # RLinf-USER's gamma for 10 Hz control (RLPD's default is the published 0.99)
        gamma=0.96, utd_ratio=4, critic_actor_ratio=4, init_temperature=0.01, temperature_lr=0.0
    )
    rlpd = RLPD(policy, config, seed=0)
    demos = RingBuffer(10_000, peg.STATE_DIM, peg.ACTION_DIM)
    online = RingBuffer(MAX_ENV_STEPS, peg.STATE_DIM, peg.ACTION_DIM)
    for seed in range(DEMOS):
        assert peg.run(robot, task, peg.expert_actor(robot, task), 10_000 + seed, demos, is_demo=True).success
    n_demo = round(config.batch_size * config.demo_ratio)  # as the buffer's demo-ratio sampler splits a batch
    n_online = config.batch_size - n_demo

    def learn() -> None:
        if online.size >= n_online:
            rlpd.update(TransitionBatch.concat([online.sample(rng, n_online), demos.sample(rng, n_demo)]))

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
