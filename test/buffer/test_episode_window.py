"""The recent window of online episodes: figures per robot, per task and pooled, demonstrations left out, and the
same windows rebuilt from a buffer's index (a task's too, when its episodes are older than its robots' windows)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.buffer.episode_window import (
    EpisodeOutcome,
    RecentEpisodes,
    WindowStats,
    episode_counts,
    latest_outcome,
    outcome,
    recent_outcomes,
    stored_tasks,
    summarise,
)
from user.interfaces.domain import Transition


def _outcome(
    robot: str, ret: float, *, steps: int = 10, success: bool = False, demo: bool = False, task: str = ""
) -> EpisodeOutcome:
    return EpisodeOutcome(robot, 0, steps, ret, success, interventions=steps // 5, is_demo=demo, task=task)


def test_a_window_is_summarised_oldest_first() -> None:
    stats = summarise([_outcome("a", -3.0, steps=10), _outcome("a", 1.0, steps=20, success=True)])
    assert stats == WindowStats(
        episodes=2, mean_return=-1.0, last_return=1.0, mean_length=15.0, success_rate=0.5, mean_interventions=3.0
    )
    assert summarise([]) is None


def test_windows_per_robot_and_pooled_keep_the_latest_online_episodes() -> None:
    recent = RecentEpisodes(window=2)
    assert recent.add(_outcome("a", 100.0, demo=True)) is False  # a demonstration is no part of any window
    assert recent.pooled() is None and recent.robots() == {}
    for robot, ret in [("a", 1.0), ("b", 2.0), ("a", 3.0), ("a", 5.0)]:
        assert recent.add(_outcome(robot, ret)) is True
    pooled = recent.pooled()
    assert pooled is not None and (pooled.episodes, pooled.mean_return, pooled.last_return) == (2, 4.0, 5.0)
    robots = recent.robots()
    assert list(robots) == ["a", "b"]
    assert (robots["a"].episodes, robots["a"].mean_return) == (2, 4.0)  # a's first episode left a's window
    assert (robots["b"].episodes, robots["b"].mean_return, robots["b"].last_return) == (1, 2.0, 2.0)


def test_a_window_of_no_episodes_is_refused_and_of_one_holds_the_last() -> None:
    with pytest.raises(ValueError, match="window: 0 episodes"):
        RecentEpisodes(window=0)
    last = RecentEpisodes(window=1, outcomes=[_outcome("a", 1.0), _outcome("a", 2.0)]).pooled()
    assert last is not None and (last.episodes, last.mean_return) == (1, 2.0)


def test_windows_per_task_keep_the_latest_online_episodes_of_all_its_robots() -> None:
    recent = RecentEpisodes(window=2)
    recent.add(_outcome("a", 100.0, demo=True, task="peg"))
    for robot, ret, task in [("a", 1.0, "peg"), ("b", 2.0, "peg"), ("a", 3.0, "button"), ("b", 5.0, "peg")]:
        recent.add(_outcome(robot, ret, task=task, success=ret > 2.0))
    tasks = recent.tasks()
    assert list(tasks) == ["button", "peg"]
    assert (tasks["peg"].episodes, tasks["peg"].mean_return, tasks["peg"].success_rate) == (2, 3.5, 0.5)
    assert (tasks["button"].episodes, tasks["button"].last_return) == (1, 3.0)
    assert RecentEpisodes(window=2, outcomes=[_outcome("a", 1.0, demo=True, task="peg")]).tasks() == {}


def _rewarded(robot: str, episode_id: int, rewards: list[float], task: str, **kwargs: object) -> list[Transition]:
    steps = episode(robot, episode_id, len(rewards), images=False, **kwargs)
    return [
        replace(t, reward=r, observation=replace(t.observation, task=task)) for t, r in zip(steps, rewards, strict=True)
    ]


def test_the_index_gives_each_episodes_outcome_and_fills_the_same_windows(tmp_path: Path) -> None:
    fed = RecentEpisodes(window=3)
    with ReplayBuffer.open(tmp_path / "buf", BufferConfig(prefetch=0)) as buf:
        assert latest_outcome(buf.storage.index) is None and episode_counts(buf.storage.index) == {}
        assert stored_tasks(buf.storage.index) == set()
        for e in range(9):
            robot = "left" if e % 3 else "right"
            task = "button" if e in (1, 2) else "peg"  # left's only: older than left's latest 3 (5, 7, 8)
            ts = _rewarded(robot, e, [0.5 * e, -1.0, 2.0], task, demo=e == 0, success=e % 2 == 1, intervened=e == 4)
            number = buf.add_episode(ts)
            row = buf.storage.index.episode(number)
            assert row is not None
            got = outcome(row)
            assert got == EpisodeOutcome(robot, e, 3, 0.5 * e + 1.0, e % 2 == 1, 3 * (e == 4), e == 0, task)
            assert latest_outcome(buf.storage.index) == got
            fed.add(got)
        assert buf.storage.index.episode(99) is None
        rebuilt = RecentEpisodes(window=3, outcomes=recent_outcomes(buf.storage.index, 3))
        assert episode_counts(buf.storage.index) == {"left": (6, 0), "right": (2, 1)}  # (online, demos)
        assert stored_tasks(buf.storage.index) == {"button", "peg"}
    assert rebuilt.pooled() == fed.pooled() and rebuilt.robots() == fed.robots()
    assert rebuilt.tasks() == fed.tasks() and list(fed.tasks()) == ["button", "peg"]
    button = fed.tasks()["button"]
    assert (button.episodes, button.mean_return, button.success_rate) == (2, 0.5 * 1.5 + 1.0, 0.5)
    pooled = fed.pooled()
    assert pooled is not None and pooled.last_return == 0.5 * 8 + 1.0
    assert pooled.mean_return == pytest.approx(0.5 * (6 + 7 + 8) / 3 + 1.0)  # episodes 6, 7, 8 of both robots
