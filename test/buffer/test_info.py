"""`user buffer info` figures of how episodes went: per robot and pooled, over the latest online episodes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.buffer.episode_window import RECENT_EPISODES, WindowStats
from user.interfaces.domain import Transition


def _rewarded(robot: str, episode_id: int, rewards: list[float], **kwargs: object) -> list[Transition]:
    steps = episode(robot, episode_id, len(rewards), images=False, **kwargs)
    return [replace(t, reward=r) for t, r in zip(steps, rewards, strict=True)]


def test_info_gives_returns_lengths_success_and_interventions_per_robot_and_pooled(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path / "buf", BufferConfig(prefetch=0)) as buf:
        buf.add_episode(_rewarded("arm", 0, [50.0] * 4, demo=True, success=True))  # a demo: counted, not averaged
        for e in range(RECENT_EPISODES + 2):  # the oldest two leave arm's window
            buf.add_episode(_rewarded("arm", e + 1, [float(e), -1.0]))
        buf.add_episode(_rewarded("cart", 0, [-10.0, -20.0, -30.0], intervened=True, success=True))
        info = buf.info()
    arm, cart = info.robots["arm"], info.robots["cart"]
    assert (arm.episodes, arm.demo_episodes, cart.demo_episodes) == (RECENT_EPISODES + 3, 1, 0)
    assert arm.recent == WindowStats(
        episodes=RECENT_EPISODES,
        mean_return=sum(range(2, RECENT_EPISODES + 2)) / RECENT_EPISODES - 1.0,
        last_return=float(RECENT_EPISODES + 1) - 1.0,
        mean_length=2.0,
        success_rate=0.0,
        mean_interventions=0.0,
    )
    assert cart.recent == WindowStats(1, -60.0, -60.0, 3.0, 1.0, 3.0)
    pooled = info.recent  # the latest 20 online episodes of both robots: 19 of arm's, then cart's
    assert pooled is not None and (pooled.episodes, pooled.last_return, pooled.mean_length) == (20, -60.0, 2.05)
    assert pooled.mean_return == pytest.approx((sum(range(3, RECENT_EPISODES + 2)) - 19.0 - 60.0) / 20)
    assert pooled.success_rate == pytest.approx(1 / 20) and pooled.mean_interventions == pytest.approx(3 / 20)
    as_json = json.loads(json.dumps(info.to_dict()))
    assert as_json["robots"]["cart"]["recent"]["mean_return"] == -60.0 and as_json["recent"]["episodes"] == 20


def test_a_buffer_of_demonstrations_only_has_no_recent_figures(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path / "buf", BufferConfig(prefetch=0)) as buf:
        buf.add_episode(_rewarded("arm", 0, [1.0, 1.0], demo=True))
        info = buf.info()
    assert info.recent is None and info.robots["arm"].recent is None and info.robots["arm"].demo_episodes == 1
    assert info.to_dict()["recent"] is None
