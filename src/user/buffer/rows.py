"""Typed rows of the index: what is known about each transition, episode and segment, and query filters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from user.buffer.segments import Position


@dataclass(frozen=True)
class TransitionRow:
    """What the index knows about one transition."""

    index: int  # buffer-wide transition number, 0.. in commit order
    segment_id: int
    offset: int  # MCAP message record offset in the segment file
    length: int  # CDR payload bytes
    episode: int  # buffer-wide episode number
    robot_id: str
    task: str
    episode_id: int  # the robot's own episode counter
    step: int
    policy_version: int
    wall_ns: int  # buffer wall clock when received (the MCAP log time)
    sim_ns: int  # the transition's own stamp (robot clock; simulation time in sim)
    reward: float
    terminated: bool
    truncated: bool
    intervened: bool
    is_demo: bool
    success: bool

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def position(self) -> Position:
        return Position(self.offset, self.length)


@dataclass(frozen=True)
class EpisodeRow:
    """What the index knows about one committed episode."""

    episode: int
    segment_id: int
    robot_id: str
    task: str
    episode_id: int
    steps: int
    first_index: int  # transition number of its first step
    success: bool
    episode_return: float
    interventions: int
    is_demo: bool
    policy_version: int  # newest policy version that acted in it
    start_wall_ns: int
    end_wall_ns: int
    start_event: Position  # EpisodeEvent KIND_START message
    end_event: Position  # EpisodeEvent KIND_END message


@dataclass(frozen=True)
class SegmentRow:
    id: int
    name: str
    state: str  # "open" (being written, or cut short by a crash) or "closed" (footer and metadata.yaml written)
    created_ns: int
    closed_ns: int | None
    bytes: int
    episodes: int
    transitions: int


@dataclass(frozen=True)
class TransitionQuery:
    """Filters for `Index.query`; None means any."""

    robot_id: str | None = None
    task: str | None = None
    is_demo: bool | None = None
    intervened: bool | None = None
    success: bool | None = None
    done: bool | None = None
    min_policy_version: int | None = None
    max_policy_version: int | None = None
    since_wall_ns: int | None = None
    episode: int | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("robot_id = ?", self.robot_id),
            ("task = ?", self.task),
            ("is_demo = ?", self.is_demo),
            ("intervened = ?", self.intervened),
            ("success = ?", self.success),
            ("(terminated OR truncated) = ?", self.done),
            ("policy_version >= ?", self.min_policy_version),
            ("policy_version <= ?", self.max_policy_version),
            ("wall_ns >= ?", self.since_wall_ns),
            ("episode = ?", self.episode),
        ):
            if value is not None:
                clauses.append(column)
                args.append(int(value) if isinstance(value, bool) else value)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args
