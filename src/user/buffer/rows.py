"""Typed rows of the index: what is known about each transition, episode and segment, and query filters.

Rows are read from the index file type-checked (`transition_from_sql` and its siblings, each taking the values of
its `*_COLUMNS` in order): a page of the file overwritten by anything reads as an `IndexDamagedError` naming the
row (and how to rebuild the index), never as a wrong type further on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from user.buffer.disk.directory import SEGMENT_NAME
from user.buffer.disk.segments import Position
from user.buffer.errors import IndexDamagedError, reindex_hint

MAX_RECORD_BYTES = 1 << 32  # no message of a segment is this long: a row saying so is damaged


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


class TransitionTotals(NamedTuple):
    """All stored transitions counted (`Index.transition_totals`)."""

    transitions: int
    demos: int
    intervened: int
    first_wall_ns: int | None  # None: no transition stored
    last_wall_ns: int | None


class EpisodeTotals(NamedTuple):
    """All stored episodes counted (`Index.episode_totals`)."""

    episodes: int
    successes: int
    online: int  # episodes that are not demonstrations
    online_successes: int


class RobotEpisodes(NamedTuple):
    """One robot's stored episodes counted (`Index.robot_episodes`)."""

    robot_id: str
    episodes: int
    steps: int
    successes: int
    last_episode_id: int  # the robot's highest stored episode id
    demo_episodes: int


class RobotTransitions(NamedTuple):
    """One robot's stored transitions of one kind, demonstrations or online, counted (`Index.robot_transitions`)."""

    robot_id: str
    is_demo: bool
    transitions: int
    intervened: int


TRANSITION_COLUMNS = (
    "idx, segment_id, offset, length, episode, robot_id, task, episode_id, step, policy_version, wall_ns, sim_ns, "
    "reward, terminated, truncated, intervened, is_demo, success"
)
# What the in-memory columns hold, in `Columns.extend_tuples` order (the task name last: it becomes a code).
COLUMN_SELECT = (
    "idx, segment_id, offset, length, episode, step, policy_version, wall_ns, reward, is_demo, intervened, "
    "terminated OR truncated, success, task"
)
EPISODE_COLUMNS = (
    "episode, segment_id, robot_id, task, episode_id, steps, first_index, success, episode_return, interventions, "
    "is_demo, policy_version, start_wall_ns, end_wall_ns, start_offset, start_length, end_offset, end_length"
)
SEGMENT_COLUMNS = "id, name, state, created_ns, closed_ns, bytes, episodes, transitions"

_SQL_TYPES: dict[str, tuple[type, ...]] = {"i": (int,), "s": (str,), "f": (int, float), "n": (int, type(None))}


def checked(row: Sequence[Any], kinds: str, what: str, where: Path) -> Sequence[Any]:
    """`row` whose values have the SQL types `kinds` spells (i: integer, s: text, f: real or integer, n: integer
    or NULL); `IndexDamagedError` (a rewritten page can hold any value) names the first one that does not."""
    for k, (value, kind) in enumerate(zip(row, kinds, strict=True)):
        if type(value) not in _SQL_TYPES[kind]:
            raise IndexDamagedError(f"{where}: {what} holds {value!r:.40} in column {k}; {reindex_hint(where.parent)}")
    return row


def _position(offset: int, length: int, what: str, where: Path) -> Position:
    if offset < 0 or not 0 <= length < MAX_RECORD_BYTES:
        raise IndexDamagedError(
            f"{where}: {what} points at byte {offset}, {length} bytes; {reindex_hint(where.parent)}"
        )
    return Position(offset, length)


def transition_from_sql(row: Sequence[Any], where: Path) -> TransitionRow:
    row = checked(row, "iiiiissiiiiifiiiii", f"transition row {row[0]!r:.20}", where)
    _position(row[2], row[3], f"transition {row[0]}", where)
    values: list[Any] = [*row[:12], float(row[12]), *(bool(v) for v in row[13:])]
    return TransitionRow(*values)


def episode_from_sql(row: Sequence[Any], where: Path) -> EpisodeRow:
    row = checked(row, "iissiiiifiiiiiiiii", f"episode row {row[0]!r:.20}", where)
    what = f"episode {row[0]}"
    return EpisodeRow(
        episode=row[0],
        segment_id=row[1],
        robot_id=row[2],
        task=row[3],
        episode_id=row[4],
        steps=row[5],
        first_index=row[6],
        success=bool(row[7]),
        episode_return=float(row[8]),
        interventions=row[9],
        is_demo=bool(row[10]),
        policy_version=row[11],
        start_wall_ns=row[12],
        end_wall_ns=row[13],
        start_event=_position(row[14], row[15], what, where),
        end_event=_position(row[16], row[17], what, where),
    )


def segment_from_sql(row: Sequence[Any], where: Path) -> SegmentRow:
    row = checked(row, "issiniii", f"segment row {row[0]!r:.20}", where)
    if not SEGMENT_NAME.fullmatch(row[1]) or row[2] not in ("open", "closed"):
        raise IndexDamagedError(
            f"{where}: segment row {row[0]} names {row[1]!r:.40} ({row[2]!r:.10}); {reindex_hint(where.parent)}"
        )
    return SegmentRow(*row)
