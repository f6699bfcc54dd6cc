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
    transitions, demos, intervened, first, last = index.fetchall(
        "SELECT COUNT(*), SUM(is_demo), SUM(intervened), MIN(wall_ns), MAX(wall_ns) FROM transitions"
    )[0]
    episodes, successes, online, online_successes = index.fetchall(
        "SELECT COUNT(*), SUM(success), SUM(NOT is_demo), SUM(success AND NOT is_demo) FROM episodes"
    )[0]
    recent = RecentEpisodes(RECENT_EPISODES, recent_outcomes(index, RECENT_EPISODES))
    per_robot = recent.robots()
    robots = {
        robot: RobotInfo(int(eps), int(steps or 0), _rate(succ, eps), int(last), int(demo or 0), per_robot.get(robot))
        for robot, eps, steps, succ, last, demo in index.fetchall(
            "SELECT robot_id, COUNT(*), SUM(steps), SUM(success), MAX(episode_id), SUM(is_demo) FROM episodes "
            "GROUP BY robot_id ORDER BY robot_id"
        )
    }
    states = dict(index.fetchall("SELECT state, COUNT(*) FROM segments GROUP BY state"))
    return BufferInfo(
        directory=str(directory),
        transitions=int(transitions),
        episodes=int(episodes),
        demo_transitions=int(demos or 0),
        intervened_transitions=int(intervened or 0),
        success_rate=_rate(successes, episodes),
        online_success_rate=_rate(online_successes, online),
        segments_closed=int(states.get("closed", 0)),
        segments_open=int(states.get("open", 0)),
        bytes_on_disk=directory_bytes(directory),
        policy_versions=[
            int(r[0]) for r in index.fetchall("SELECT DISTINCT policy_version FROM transitions ORDER BY 1")
        ],
        robots=robots,
        tasks={str(t): int(n) for t, n in index.fetchall("SELECT task, COUNT(*) FROM episodes GROUP BY task")},
        first_wall_ns=first,
        last_wall_ns=last,
        recent=recent.pooled(),
    )
