"""What a run's replay buffer holds, for the report: `user buffer info`'s figures (`user.buffer.info`) and, per
robot, demonstration / online / intervened transitions, and where the bytes on disk are. Read-only, from the
buffer's index (works beside a running learner)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.disk.directory import SEGMENTS_DIR
from user.buffer.index import Index
from user.buffer.info import BufferInfo, directory_bytes, read_info


@dataclass(frozen=True)
class RobotComposition:
    """One robot's share of the buffer."""

    episodes: int
    demo_episodes: int
    demo_transitions: int
    online_transitions: int
    intervened_transitions: int  # online transitions a human acted in

    @property
    def transitions(self) -> int:
        return self.demo_transitions + self.online_transitions


@dataclass(frozen=True)
class BufferSummary:
    info: BufferInfo  # what `user buffer info` shows
    robots: dict[str, RobotComposition] = field(default_factory=dict)
    segment_bytes: int = 0  # the MCAP segments
    other_bytes: int = 0  # the index, its write-ahead log, the lock

    @property
    def online_transitions(self) -> int:
        return self.info.transitions - self.info.demo_transitions


def composition(index: Index) -> dict[str, RobotComposition]:
    """Per robot (by id): its episodes and transitions, demonstrations and online apart."""
    transitions: dict[str, dict[bool, tuple[int, int]]] = {}
    for r in index.robot_transitions():
        transitions.setdefault(r.robot_id, {})[r.is_demo] = (r.transitions, r.intervened)
    episodes = {r.robot_id: (r.episodes, r.demo_episodes) for r in index.robot_episodes()}
    robots: dict[str, RobotComposition] = {}
    for robot in sorted(set(transitions) | set(episodes)):
        demo, _ = transitions.get(robot, {}).get(True, (0, 0))
        online, intervened = transitions.get(robot, {}).get(False, (0, 0))
        n, demo_episodes = episodes.get(robot, (0, 0))
        robots[robot] = RobotComposition(n, demo_episodes, demo, online, intervened)
    return robots


def load_buffer(directory: Path) -> BufferSummary:
    """The summary of the buffer at `directory`; BufferError (e.g. no index, a damaged one) or OSError."""
    index = Index(directory, read_only=True)
    try:
        with index.snapshot():  # one state for both: the per-robot rows add up to the totals beside a running learner
            info = read_info(index, directory)
            robots = composition(index)
    finally:
        index.close()
    segments = directory_bytes(directory / SEGMENTS_DIR)
    return BufferSummary(info, robots, segments, max(0, info.bytes_on_disk - segments))
