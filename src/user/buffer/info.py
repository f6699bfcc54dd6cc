"""`user buffer info`: what a buffer directory holds, from its index (cheap, works beside a running writer)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from user.buffer.episode_window import RECENT_EPISODES, RecentEpisodes, WindowStats, recent_outcomes
from user.buffer.index import Index


@dataclass(frozen=True)
class RobotInfo:
    episodes: int
    transitions: int
    success_rate: float
    last_episode_id: int = -1  # the robot's highest stored episode id (a resumed robot continues after it)
    demo_episodes: int = 0  # of `episodes`, demonstrations
    recent: WindowStats | None = None  # its latest `recent_window` online episodes (None: no online episode)


@dataclass(frozen=True)
class BufferInfo:
    """Counts and sizes of one buffer."""

    directory: str
    transitions: int
    episodes: int
    demo_transitions: int
    intervened_transitions: int
    success_rate: float  # successful episodes / episodes (demos included)
    online_success_rate: float  # the same over non-demo episodes only
    segments_closed: int
    segments_open: int
    bytes_on_disk: int  # everything under the directory (segments, index, WAL)
    policy_versions: list[int] = field(default_factory=list)  # distinct versions that acted
    robots: dict[str, RobotInfo] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)  # task -> episodes
    first_wall_ns: int | None = None
    last_wall_ns: int | None = None
    recent_window: int = RECENT_EPISODES  # episodes the `recent` figures are taken over
    recent: WindowStats | None = None  # the latest `recent_window` online episodes of all robots

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rate(successes: int | None, total: int | None) -> float:
    return float(successes or 0) / total if total else 0.0


def directory_bytes(directory: Path) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue  # removed while walking (a concurrent writer's temporary file)
    return total


def buffer_info(index: Index, directory: Path) -> BufferInfo:
    with index.snapshot():
        return read_info(index, directory)


def read_info(index: Index, directory: Path) -> BufferInfo:
    """`buffer_info` inside the caller's `index.snapshot()` (where other reads must see the same state)."""
    transitions, episodes = index.transition_totals(), index.episode_totals()
    recent = RecentEpisodes(RECENT_EPISODES, recent_outcomes(index, RECENT_EPISODES))
    per_robot = recent.robots()
    robots = {
        r.robot_id: RobotInfo(
            r.episodes,
            r.steps,
            _rate(r.successes, r.episodes),
            r.last_episode_id,
            r.demo_episodes,
            per_robot.get(r.robot_id),
        )
        for r in index.robot_episodes()
    }
    states = index.segment_states()
    return BufferInfo(
        directory=str(directory),
        transitions=transitions.transitions,
        episodes=episodes.episodes,
        demo_transitions=transitions.demos,
        intervened_transitions=transitions.intervened,
        success_rate=_rate(episodes.successes, episodes.episodes),
        online_success_rate=_rate(episodes.online_successes, episodes.online),
        segments_closed=states.get("closed", 0),
        segments_open=states.get("open", 0),
        bytes_on_disk=directory_bytes(directory),
        policy_versions=index.policy_versions(),
        robots=robots,
        tasks=index.task_episodes(),
        first_wall_ns=transitions.first_wall_ns,
        last_wall_ns=transitions.last_wall_ns,
        recent=recent.pooled(),
    )
