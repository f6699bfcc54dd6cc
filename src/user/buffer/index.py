"""The SQLite index beside the segments: one row per transition, per episode, per segment, and every query of them.

Committing an episode is one transaction: its transitions become part of the buffer all together or not
at all. Rows are never updated except by recovery, which moves positions into a rewritten segment (and
drops the episodes it could not read, numbering the later transitions down so they stay contiguous).

The index can be rebuilt from the segments (`user buffer reindex`), so a missing index beside segments, or
a damaged one, is an error that says so (`MissingIndexError`, `IndexDamagedError`), never an empty buffer or
a traceback; rows are type-checked as they are read. The file itself (schema, connection, transactions) is
`IndexFile`'s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import astuple, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

from user.buffer.disk.directory import SEGMENTS_DIR, has_segments
from user.buffer.disk.segments import Position
from user.buffer.errors import BufferIndexError, MissingIndexError, reindex_hint
from user.buffer.index_file import IndexFile
from user.buffer.rows import (
    COLUMN_SELECT,
    EPISODE_COLUMNS,
    SEGMENT_COLUMNS,
    TRANSITION_COLUMNS,
    EpisodeRow,
    EpisodeTotals,
    RobotEpisodes,
    RobotTransitions,
    SegmentRow,
    TransitionQuery,
    TransitionRow,
    TransitionTotals,
    episode_from_sql,
    segment_from_sql,
    transition_from_sql,
)

INDEX_FILE = "index.sqlite3"


class Index(IndexFile):
    """The index of buffer `directory`; its methods are safe to call from several threads.

    `fresh=True` builds a new index file named `file_name` (reindex) even beside segments; otherwise opening
    for writing where segments lie but no index does is a `MissingIndexError`."""

    def __init__(
        self,
        directory: Path,
        *,
        read_only: bool = False,
        durable: bool = True,
        file_name: str = INDEX_FILE,
        fresh: bool = False,
    ) -> None:
        path = directory / file_name
        if not fresh and not path.exists():
            if has_segments(directory):
                raise MissingIndexError(
                    f"{path}: no index here, but {directory / SEGMENTS_DIR} holds segments; {reindex_hint(directory)}"
                )
            if read_only:
                raise BufferIndexError(f"{path}: no index here (is {directory} a buffer directory?)")
        super().__init__(directory, path, read_only=read_only, durable=durable)

    # ------------------------------------------------------------------------------------------ segments

    def segments(self) -> list[SegmentRow]:
        return [
            segment_from_sql(r, self.path) for r in self.fetchall(f"SELECT {SEGMENT_COLUMNS} FROM segments ORDER BY id")
        ]

    def add_segment(self, name: str, created_ns: int) -> SegmentRow:
        with self.transaction() as db:
            cur = db.execute("INSERT INTO segments(name, state, created_ns) VALUES (?, 'open', ?)", (name, created_ns))
            seg_id = int(cur.lastrowid or 0)
        return SegmentRow(seg_id, name, "open", created_ns, None, 0, 0, 0)

    def close_segment(self, segment_id: int, size: int, closed_ns: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE segments SET state = 'closed', bytes = ?, closed_ns = ? WHERE id = ?",
                (size, closed_ns, segment_id),
            )

    def reopen_segment(self, segment_id: int) -> None:
        """Mark a closed segment open again: recovery is about to rewrite it (its file no longer matches)."""
        with self.transaction() as db:
            db.execute("UPDATE segments SET state = 'open', closed_ns = NULL WHERE id = ?", (segment_id,))

    def delete_segment(self, segment_id: int) -> None:
        """Forget a segment and its episodes; transitions after them are numbered down (see `move_segment`)."""
        with self.transaction() as db:
            episodes = [r[0] for r in db.execute("SELECT episode FROM episodes WHERE segment_id = ?", (segment_id,))]
            _drop_episodes(db, episodes)
            db.execute("DELETE FROM transitions WHERE segment_id = ?", (segment_id,))  # rows of no episode
            db.execute("DELETE FROM segments WHERE id = ?", (segment_id,))

    # ------------------------------------------------------------------------------------------ episodes

    def commit_episode(self, episode: EpisodeRow, rows: Sequence[TransitionRow], segment_bytes: int) -> None:
        """Add one episode and its transitions, all in one transaction."""
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO episodes({EPISODE_COLUMNS}) VALUES ({', '.join('?' * 18)})", _episode_values(episode)
            )
            db.executemany(
                f"INSERT INTO transitions({TRANSITION_COLUMNS}) VALUES ({', '.join('?' * 18)})",
                [_transition_values(r) for r in rows],
            )
            db.execute(
                "UPDATE segments SET bytes = ?, episodes = episodes + 1, transitions = transitions + ? WHERE id = ?",
                (segment_bytes, len(rows), episode.segment_id),
            )

    def episodes(self, segment_id: int | None = None) -> list[EpisodeRow]:
        where, args = ("WHERE segment_id = ?", [segment_id]) if segment_id is not None else ("", [])
        return [
            episode_from_sql(r, self.path)
            for r in self.fetchall(f"SELECT {EPISODE_COLUMNS} FROM episodes {where} ORDER BY episode", args)
        ]

    def transitions(
        self, start: int = 0, stop: int | None = None, *, segment_id: int | None = None
    ) -> list[TransitionRow]:
        sql = f"SELECT {TRANSITION_COLUMNS} FROM transitions WHERE idx >= ?"
        args: list[Any] = [start]
        if stop is not None:
            sql += " AND idx < ?"
            args.append(stop)
        if segment_id is not None:
            sql += " AND segment_id = ?"
            args.append(segment_id)
        return [transition_from_sql(r, self.path) for r in self.fetchall(sql + " ORDER BY idx", args)]

    def column_rows(self, start: int) -> list[tuple[Any, ...]]:
        """Rows from transition `start` on, as tuples in `COLUMN_SELECT` order (fast bulk load)."""
        return self.fetchall(f"SELECT {COLUMN_SELECT} FROM transitions WHERE idx >= ? ORDER BY idx", [start])

    def count(self) -> tuple[int, int]:
        """(transitions, episodes) committed."""
        rows = self.fetchall("SELECT (SELECT COUNT(*) FROM transitions), (SELECT COUNT(*) FROM episodes)")
        return int(rows[0][0]), int(rows[0][1])  # COUNT is always an integer

    def next_numbers(self) -> tuple[int, int]:
        """The transition number and episode number the next commit starts at."""
        rows = self.fetchall("SELECT (SELECT MAX(idx) FROM transitions), (SELECT MAX(episode) FROM episodes)")
        last_idx, last_ep = rows[0]  # numbers of INTEGER PRIMARY KEY columns: always integers
        return (-1 if last_idx is None else last_idx) + 1, (-1 if last_ep is None else last_ep) + 1

    def query(self, query: TransitionQuery, limit: int | None = None) -> list[int]:
        """Transition numbers matching `query`, oldest first (uses the column indexes)."""
        where, args = _where(query)
        sql = f"SELECT idx FROM transitions{where} ORDER BY idx"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [int(r[0]) for r in self.fetchall(sql, args)]

    def stored_episode(self, robot_id: str, episode_id: int) -> int | None:
        """The buffer episode number under which `robot_id`'s episode `episode_id` is stored, or None (one lookup
        in the (robot_id, episode_id) column index)."""
        rows = self.fetchall(
            "SELECT episode FROM transitions WHERE robot_id = ? AND episode_id = ? LIMIT 1", (robot_id, int(episode_id))
        )
        return int(rows[0][0]) if rows else None

    def episode(self, episode: int) -> EpisodeRow | None:
        """Buffer episode number `episode`, or None when it is not stored."""
        rows = self.fetchall(f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE episode = ?", (int(episode),))
        return episode_from_sql(rows[0], self.path) if rows else None

    def last_episode(self) -> EpisodeRow | None:
        """The newest stored episode, or None when there is none."""
        rows = self.fetchall(f"SELECT {EPISODE_COLUMNS} FROM episodes ORDER BY episode DESC LIMIT 1")
        return episode_from_sql(rows[0], self.path) if rows else None

    def recent_episodes(self, window: int) -> list[EpisodeRow]:
        """Each robot's and each task's latest `window` episodes that are not demonstrations, oldest first."""
        rows = self.fetchall(
            f"SELECT {EPISODE_COLUMNS} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY robot_id ORDER BY episode DESC) "
            "AS k, ROW_NUMBER() OVER (PARTITION BY task ORDER BY episode DESC) AS kt FROM episodes WHERE NOT is_demo) "
            "WHERE k <= ? OR kt <= ? ORDER BY episode",
            (int(window), int(window)),
        )
        return [episode_from_sql(r, self.path) for r in rows]

    # ------------------------------------------------------------------------------------------ totals

    def transition_totals(self) -> TransitionTotals:
        """All stored transitions counted."""
        rows = self.fetchall(
            "SELECT COUNT(*), SUM(is_demo), SUM(intervened), MIN(wall_ns), MAX(wall_ns) FROM transitions"
        )
        count, demos, intervened, first, last = rows[0]
        return TransitionTotals(int(count), int(demos or 0), int(intervened or 0), first, last)

    def episode_totals(self) -> EpisodeTotals:
        """All stored episodes counted."""
        rows = self.fetchall(
            "SELECT COUNT(*), SUM(success), SUM(NOT is_demo), SUM(success AND NOT is_demo) FROM episodes"
        )
        return EpisodeTotals(*(int(n or 0) for n in rows[0]))

    def robot_episodes(self) -> list[RobotEpisodes]:
        """Each robot's stored episodes counted, by robot id."""
        rows = self.fetchall(
            "SELECT robot_id, COUNT(*), SUM(steps), SUM(success), MAX(episode_id), SUM(is_demo) FROM episodes "
            "GROUP BY robot_id ORDER BY robot_id"
        )
        return [RobotEpisodes(str(robot), *(int(n or 0) for n in counts)) for robot, *counts in rows]

    def robot_transitions(self) -> list[RobotTransitions]:
        """Each robot's stored transitions counted, demonstrations and online apart."""
        rows = self.fetchall(
            "SELECT robot_id, is_demo, COUNT(*), SUM(intervened) FROM transitions GROUP BY robot_id, is_demo"
        )
        return [RobotTransitions(str(robot), bool(demo), int(n), int(held or 0)) for robot, demo, n, held in rows]

    def segment_states(self) -> dict[str, int]:
        """How many segments are "open" and how many "closed"."""
        return {str(state): int(n) for state, n in self.fetchall("SELECT state, COUNT(*) FROM segments GROUP BY state")}

    def policy_versions(self) -> list[int]:
        """The distinct policy versions that acted in stored transitions, in order."""
        return [int(r[0]) for r in self.fetchall("SELECT DISTINCT policy_version FROM transitions ORDER BY 1")]

    def task_episodes(self) -> dict[str, int]:
        """Stored episodes per task."""
        return {str(t): int(n) for t, n in self.fetchall("SELECT task, COUNT(*) FROM episodes GROUP BY task")}

    # ------------------------------------------------------------------------------------------ recovery

    def move_segment(
        self,
        segment_id: int,
        transitions: Sequence[tuple[int, Position]],
        events: Sequence[tuple[int, Position, Position]],
        size: int,
        closed_ns: int,
        *,
        dropped: Sequence[int] = (),
    ) -> None:
        """Point rows at a rewritten segment file, drop the episodes `dropped` (buffer episode numbers) that it
        no longer holds, and mark it closed, all in one transaction."""
        with self.transaction() as db:
            db.executemany(
                "UPDATE transitions SET offset = ?, length = ? WHERE idx = ?",
                [(p.offset, p.length, idx) for idx, p in transitions],
            )
            db.executemany(
                "UPDATE episodes SET start_offset = ?, start_length = ?, end_offset = ?, end_length = ? "
                "WHERE episode = ?",
                [(s.offset, s.length, e.offset, e.length, ep) for ep, s, e in events],
            )
            _drop_episodes(db, dropped)
            db.execute(
                "UPDATE segments SET state = 'closed', bytes = ?, closed_ns = ? WHERE id = ?",
                (size, closed_ns, segment_id),
            )


def _where(query: TransitionQuery) -> tuple[str, list[Any]]:
    """The WHERE clause (empty when nothing is filtered) and its arguments that select `query`'s transitions."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("robot_id = ?", query.robot_id),
        ("task = ?", query.task),
        ("is_demo = ?", query.is_demo),
        ("intervened = ?", query.intervened),
        ("success = ?", query.success),
        ("(terminated OR truncated) = ?", query.done),
        ("policy_version >= ?", query.min_policy_version),
        ("policy_version <= ?", query.max_policy_version),
        ("wall_ns >= ?", query.since_wall_ns),
        ("episode = ?", query.episode),
    ):
        if value is not None:
            clauses.append(column)
            args.append(int(value) if isinstance(value, bool) else value)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def _drop_episodes(db: sqlite3.Connection, episodes: Sequence[int]) -> None:
    """Delete `episodes` and their transitions (inside a transaction); their segments' counts become what is left,
    later transitions are numbered down so the numbers stay contiguous (the in-memory columns are indexed by them),
    and episodes' first_index follow."""
    firsts: list[int] = []
    owners: set[int] = set()
    for episode in episodes:
        owners.update(r[0] for r in db.execute("SELECT segment_id FROM episodes WHERE episode = ?", (episode,)))
        first = db.execute("SELECT MIN(idx) FROM transitions WHERE episode = ?", (episode,)).fetchone()[0]
        db.execute("DELETE FROM transitions WHERE episode = ?", (episode,))
        db.execute("DELETE FROM episodes WHERE episode = ?", (episode,))
        if first is not None:
            firsts.append(first)
    db.executemany(
        "UPDATE segments SET episodes = (SELECT COUNT(*) FROM episodes WHERE segment_id = segments.id), "
        "transitions = (SELECT COUNT(*) FROM transitions WHERE segment_id = segments.id) WHERE id = ?",
        [(seg,) for seg in sorted(owners)],
    )
    if firsts:
        _number_down(db, min(firsts))


def _number_down(db: sqlite3.Connection, first: int) -> None:
    """Number the transitions after the free number `first` first, first + 1, ... (in their order)."""
    later = [r[0] for r in db.execute("SELECT idx FROM transitions WHERE idx > ? ORDER BY idx", (first,))]
    # through negative numbers: no row ever takes a number another row still holds
    db.executemany("UPDATE transitions SET idx = ? WHERE idx = ?", [(-1 - (first + k), i) for k, i in enumerate(later)])
    db.execute("UPDATE transitions SET idx = -1 - idx WHERE idx < 0")
    db.execute(
        "UPDATE episodes SET first_index = (SELECT MIN(idx) FROM transitions WHERE transitions.episode = "
        "episodes.episode) WHERE first_index > ?",
        (first,),
    )


def _episode_values(e: EpisodeRow) -> tuple[Any, ...]:
    head = astuple(e)[:-2]
    return (*head, e.start_event.offset, e.start_event.length, e.end_event.offset, e.end_event.length)


_TRANSITION_FIELDS = attrgetter(*(f.name for f in fields(TransitionRow)))  # flat: astuple deep-copies each value


def _transition_values(r: TransitionRow) -> tuple[Any, ...]:
    return _TRANSITION_FIELDS(r)  # field order is TRANSITION_COLUMNS; bools are stored as 0/1
