"""The SQLite index beside the segments (WAL mode): one row per transition, per episode, per segment.

Committing an episode is one transaction: its transitions become part of the buffer all together or not
at all. Rows are never updated except by recovery, which moves positions into a rewritten segment.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple
from pathlib import Path
from typing import Any

from user.buffer.errors import BufferIndexError
from user.buffer.rows import EpisodeRow, SegmentRow, TransitionQuery, TransitionRow
from user.buffer.segments import Position

__all__ = ["EpisodeRow", "Index", "SegmentRow", "TransitionQuery", "TransitionRow"]

INDEX_FILE = "index.sqlite3"
FORMAT_VERSION = "1"
BUSY_TIMEOUT_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments(
  id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, state TEXT NOT NULL CHECK(state IN ('open', 'closed')),
  created_ns INTEGER NOT NULL, closed_ns INTEGER, bytes INTEGER NOT NULL DEFAULT 0,
  episodes INTEGER NOT NULL DEFAULT 0, transitions INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS episodes(
  episode INTEGER PRIMARY KEY, segment_id INTEGER NOT NULL REFERENCES segments(id),
  robot_id TEXT NOT NULL, task TEXT NOT NULL, episode_id INTEGER NOT NULL, steps INTEGER NOT NULL,
  first_index INTEGER NOT NULL, success INTEGER NOT NULL, episode_return REAL NOT NULL,
  interventions INTEGER NOT NULL, is_demo INTEGER NOT NULL, policy_version INTEGER NOT NULL,
  start_wall_ns INTEGER NOT NULL, end_wall_ns INTEGER NOT NULL,
  start_offset INTEGER NOT NULL, start_length INTEGER NOT NULL,
  end_offset INTEGER NOT NULL, end_length INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS transitions(
  idx INTEGER PRIMARY KEY, segment_id INTEGER NOT NULL REFERENCES segments(id),
  offset INTEGER NOT NULL, length INTEGER NOT NULL, episode INTEGER NOT NULL REFERENCES episodes(episode),
  robot_id TEXT NOT NULL, task TEXT NOT NULL, episode_id INTEGER NOT NULL, step INTEGER NOT NULL,
  policy_version INTEGER NOT NULL, wall_ns INTEGER NOT NULL, sim_ns INTEGER NOT NULL, reward REAL NOT NULL,
  terminated INTEGER NOT NULL, truncated INTEGER NOT NULL, intervened INTEGER NOT NULL,
  is_demo INTEGER NOT NULL, success INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS transitions_episode ON transitions(episode);
CREATE INDEX IF NOT EXISTS transitions_robot ON transitions(robot_id, episode_id);
CREATE INDEX IF NOT EXISTS transitions_version ON transitions(policy_version);
CREATE INDEX IF NOT EXISTS transitions_demo ON transitions(is_demo);
CREATE INDEX IF NOT EXISTS transitions_intervened ON transitions(intervened);
CREATE INDEX IF NOT EXISTS episodes_segment ON episodes(segment_id);
"""

TRANSITION_COLUMNS = (
    "idx, segment_id, offset, length, episode, robot_id, task, episode_id, step, policy_version, wall_ns, sim_ns, "
    "reward, terminated, truncated, intervened, is_demo, success"
)
# What the in-memory columns hold, in `Columns.extend_tuples` order.
COLUMN_SELECT = (
    "idx, segment_id, offset, length, episode, step, policy_version, wall_ns, reward, is_demo, intervened, "
    "terminated OR truncated, success"
)
_EPISODE_COLUMNS = (
    "episode, segment_id, robot_id, task, episode_id, steps, first_index, success, episode_return, interventions, "
    "is_demo, policy_version, start_wall_ns, end_wall_ns, start_offset, start_length, end_offset, end_length"
)


def _transition(row: Sequence[Any]) -> TransitionRow:
    values: list[Any] = [*row[:12], float(row[12]), *(bool(v) for v in row[13:])]
    return TransitionRow(*values)


def _episode(row: Sequence[Any]) -> EpisodeRow:
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
        start_event=Position(row[14], row[15]),
        end_event=Position(row[16], row[17]),
    )


class Index:
    """One connection to the index; its methods are safe to call from several threads."""

    def __init__(self, directory: Path, *, read_only: bool = False, durable: bool = True) -> None:
        self.path = directory / INDEX_FILE
        self.read_only = read_only
        self._lock = threading.RLock()
        try:
            if read_only:
                if not self.path.exists():
                    raise BufferIndexError(f"{self.path}: no index here (is {directory} a buffer directory?)")
                uri = f"file:{self.path}?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            else:
                self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
            self._db.isolation_level = None  # explicit BEGIN/COMMIT
            if not read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                self._db.executescript(_SCHEMA)
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format_version', ?)", (FORMAT_VERSION,))
            self._check_format()
        except sqlite3.DatabaseError as exc:
            raise BufferIndexError(f"{self.path}: cannot open the index ({exc})") from exc

    def _check_format(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        if row is None or row[0] != FORMAT_VERSION:
            raise BufferIndexError(
                f"{self.path}: index format {row[0] if row else 'unknown'}, expected {FORMAT_VERSION}"
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back if the body raises."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one consistent state, even while another process commits (WAL read transaction)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield
            finally:
                self._db.execute("COMMIT")

    def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as exc:
                raise BufferIndexError(f"{self.path}: query failed ({exc}): {sql}") from exc

    def scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = self.fetchall(sql, args)
        return rows[0][0] if rows else None

    # ------------------------------------------------------------------------------------------ segments

    def segments(self) -> list[SegmentRow]:
        return [SegmentRow(*r) for r in self.fetchall("SELECT * FROM segments ORDER BY id")]

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

    def delete_segment(self, segment_id: int) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM transitions WHERE segment_id = ?", (segment_id,))
            db.execute("DELETE FROM episodes WHERE segment_id = ?", (segment_id,))
            db.execute("DELETE FROM segments WHERE id = ?", (segment_id,))

    # ------------------------------------------------------------------------------------------ episodes

    def commit_episode(self, episode: EpisodeRow, rows: Sequence[TransitionRow], segment_bytes: int) -> None:
        """Add one episode and its transitions, all in one transaction."""
        with self.transaction() as db:
            db.execute(
                f"INSERT INTO episodes({_EPISODE_COLUMNS}) VALUES ({', '.join('?' * 18)})", _episode_values(episode)
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
            _episode(r)
            for r in self.fetchall(f"SELECT {_EPISODE_COLUMNS} FROM episodes {where} ORDER BY episode", args)
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
        return [_transition(r) for r in self.fetchall(sql + " ORDER BY idx", args)]

    def column_rows(self, start: int) -> list[tuple[Any, ...]]:
        """Rows from transition `start` on, as tuples in `COLUMN_SELECT` order (fast bulk load)."""
        return self.fetchall(f"SELECT {COLUMN_SELECT} FROM transitions WHERE idx >= ? ORDER BY idx", [start])

    def count(self) -> tuple[int, int]:
        """(transitions, episodes) committed."""
        rows = self.fetchall("SELECT (SELECT COUNT(*) FROM transitions), (SELECT COUNT(*) FROM episodes)")
        return int(rows[0][0]), int(rows[0][1])

    def next_numbers(self) -> tuple[int, int]:
        """The transition number and episode number the next commit starts at."""
        rows = self.fetchall("SELECT (SELECT MAX(idx) FROM transitions), (SELECT MAX(episode) FROM episodes)")
        last_idx, last_ep = rows[0]
        return (-1 if last_idx is None else last_idx) + 1, (-1 if last_ep is None else last_ep) + 1

    def query(self, query: TransitionQuery, limit: int | None = None) -> list[int]:
        """Transition numbers matching `query`, oldest first (uses the column indexes)."""
        where, args = query.where()
        sql = f"SELECT idx FROM transitions{where} ORDER BY idx"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [int(r[0]) for r in self.fetchall(sql, args)]

    # ------------------------------------------------------------------------------------------ recovery

    def truncate_from_episode(self, episode: int) -> None:
        """Drop episode `episode` and every later one (used when recovery finds them unreadable)."""
        with self.transaction() as db:
            rows = db.execute(
                "SELECT segment_id, COUNT(*) FROM transitions WHERE episode >= ? GROUP BY segment_id", (episode,)
            )
            for seg_id, n in rows.fetchall():
                eps = db.execute(
                    "SELECT COUNT(*) FROM episodes WHERE segment_id = ? AND episode >= ?", (seg_id, episode)
                )
                db.execute(
                    "UPDATE segments SET transitions = transitions - ?, episodes = episodes - ? WHERE id = ?",
                    (n, eps.fetchone()[0], seg_id),
                )
            db.execute("DELETE FROM transitions WHERE episode >= ?", (episode,))
            db.execute("DELETE FROM episodes WHERE episode >= ?", (episode,))

    def move_segment(
        self,
        segment_id: int,
        transitions: Sequence[tuple[int, Position]],
        events: Sequence[tuple[int, Position, Position]],
        size: int,
        closed_ns: int,
    ) -> None:
        """Point rows at a rewritten segment file and mark it closed, in one transaction."""
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
            db.execute(
                "UPDATE segments SET state = 'closed', bytes = ?, closed_ns = ? WHERE id = ?",
                (size, closed_ns, segment_id),
            )


def _episode_values(e: EpisodeRow) -> tuple[Any, ...]:
    head = astuple(e)[:-2]
    return (*head, e.start_event.offset, e.start_event.length, e.end_event.offset, e.end_event.length)


def _transition_values(r: TransitionRow) -> tuple[Any, ...]:
    return astuple(r)  # field order is TRANSITION_COLUMNS; bools are stored as 0/1
