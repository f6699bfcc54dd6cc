"""Rows as read from the index file, type-checked: a page of the file overwritten by anything reads as an
`IndexDamagedError` naming the row (and how to rebuild the index), never as a wrong type further on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from user.buffer.errors import BufferIndexError
from user.buffer.rows import EpisodeRow, SegmentRow, TransitionRow
from user.buffer.segments import Position

SEGMENTS_DIR = "segments"
MAX_RECORD_BYTES = 1 << 32  # no message of a segment is this long: a row saying so is damaged
SEGMENT_NAME = re.compile(r"seg_[0-9]{6,}")


class MissingIndexError(BufferIndexError):
    """A buffer directory holds segments but no index (deleted, or lost with a disk): rebuild it."""


class IndexDamagedError(BufferIndexError):
    """The index file is not a database, or parts of it were overwritten: rebuild it from the segments."""


def reindex_hint(directory: Path) -> str:
    return f"rebuild it from the segments with `user buffer reindex {directory}`"


def has_segments(directory: Path) -> bool:
    """Whether `directory` holds at least one segment directory."""
    root = directory / SEGMENTS_DIR
    return root.is_dir() and any(p.is_dir() for p in root.iterdir())


TRANSITION_COLUMNS = (
    "idx, segment_id, offset, length, episode, robot_id, task, episode_id, step, policy_version, wall_ns, sim_ns, "
    "reward, terminated, truncated, intervened, is_demo, success"
)
# What the in-memory columns hold, in `Columns.extend_tuples` order.
COLUMN_SELECT = (
    "idx, segment_id, offset, length, episode, step, policy_version, wall_ns, reward, is_demo, intervened, "
    "terminated OR truncated, success"
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


def transition_row(row: Sequence[Any], where: Path) -> TransitionRow:
    row = checked(row, "iiiiissiiiiifiiiii", f"transition row {row[0]!r:.20}", where)
    _position(row[2], row[3], f"transition {row[0]}", where)
    values: list[Any] = [*row[:12], float(row[12]), *(bool(v) for v in row[13:])]
    return TransitionRow(*values)


def episode_row(row: Sequence[Any], where: Path) -> EpisodeRow:
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


def segment_row(row: Sequence[Any], where: Path) -> SegmentRow:
    row = checked(row, "issiniii", f"segment row {row[0]!r:.20}", where)
    if not SEGMENT_NAME.fullmatch(row[1]) or row[2] not in ("open", "closed"):
        raise IndexDamagedError(
            f"{where}: segment row {row[0]} names {row[1]!r:.40} ({row[2]!r:.10}); {reindex_hint(where.parent)}"
        )
    return SegmentRow(*row)
