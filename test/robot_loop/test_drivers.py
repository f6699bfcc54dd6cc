"""`build_driver` for gymnasium envs: the episode limit follows the env's own unless `max_steps` is given."""

from __future__ import annotations

from typing import Any

import pytest

from user.config.strict import from_mapping
from user.robot_loop.driver_spec import DriverSpec
from user.robot_loop.drivers import GYM_MAX_STEPS, build_driver

gymnasium = pytest.importorskip("gymnasium")

UNLIMITED = "UserTest/PendulumWithoutLimit-v0"  # Pendulum registered without a TimeLimit


def gym_spec(env_id: str, **settings: Any) -> DriverSpec:
    return from_mapping(DriverSpec, {"driver": "gym", "robot_id": "g", "gym_env": env_id, **settings}, where="robot")


def max_steps(env_id: str, **settings: Any) -> int:
    bundle = build_driver(gym_spec(env_id, **settings))
    return bundle.scorer.max_steps


def test_an_env_without_a_limit_of_its_own_gets_the_fallback() -> None:
    if UNLIMITED not in gymnasium.registry:
        gymnasium.register(UNLIMITED, entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv")
    assert GYM_MAX_STEPS == 200
    assert max_steps(UNLIMITED) == GYM_MAX_STEPS
    assert max_steps(UNLIMITED, max_steps=30) == 30


def test_the_episode_limit_is_the_env_s_own_unless_given() -> None:
    pytest.importorskip("mujoco")
    assert max_steps("InvertedPendulum-v5") == 1000  # its TimeLimit, not the fallback of 200
    assert max_steps("InvertedPendulum-v5", max_steps=50) == 50  # given: it wins
    assert max_steps("Pendulum-v1") == 200  # Pendulum's own limit
