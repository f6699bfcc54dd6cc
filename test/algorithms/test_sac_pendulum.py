"""SAC learns gymnasium Pendulum-v1 from state: average return >= -250 within 15k environment steps."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from test.algorithms.ring import RingBuffer
from user.algorithms.sac import SAC, SACConfig
from user.policies.base import PolicyInput
from user.policies.mlp import MLPPolicy, MLPPolicyConfig

pytest.importorskip("gymnasium")
from user.robots.gym_robot import GymRobot

log = logging.getLogger(__name__)

TOTAL_STEPS = 15_000
WARMUP = 1_000
EPISODE = 200  # Pendulum-v1 truncates after 200 steps


def _evaluate(robot: GymRobot, policy: MLPPolicy, seeds: range) -> float:
    returns = []
    for seed in seeds:
        obs = robot.reset(seed=seed).vector()
        total = 0.0
        while not robot.episode_over:
            obs = robot.step(policy.act(PolicyInput(obs), deterministic=True)).state.vector()
            total += robot.last_reward
        returns.append(total)
    return float(np.mean(returns))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_sac_learns_pendulum() -> None:
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    robot = GymRobot("Pendulum-v1")
    robot.connect()
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=1, seed=0))
    sac = SAC(policy, SACConfig(gamma=0.99, batch_size=256), seed=0)
    buffer = RingBuffer(TOTAL_STEPS, 3, 1)
    obs = robot.reset(seed=0).vector()
    curve: list[tuple[int, float]] = []
    episode_return, episodes = 0.0, 0
    for step in range(1, TOTAL_STEPS + 1):
        action = rng.uniform(-1, 1, 1).astype(np.float32) if step <= WARMUP else policy.act(PolicyInput(obs))
        result = robot.step(action)
        next_obs = result.state.vector()
        buffer.add(obs, result.applied, robot.last_reward, next_obs, robot.last_terminated)
        episode_return += robot.last_reward
        obs = next_obs
        if robot.episode_over:
            episodes += 1
            curve.append((step, episode_return))
            log.info("step %d return %.1f", step, episode_return)
            obs, episode_return = robot.reset(seed=episodes).vector(), 0.0
        if step > WARMUP:
            sac.update(buffer.sample(rng, 256))
    final = _evaluate(robot, policy, range(1000, 1010))
    log.info("pendulum curve (step, return): %s; final deterministic average over 10 episodes %.1f", curve, final)
    print(f"\npendulum returns every 5 episodes: {[(s, round(r)) for s, r in curve[::5]]}")
    print(f"pendulum final average return (10 eval episodes): {final:.1f}")
    assert final >= -250.0
