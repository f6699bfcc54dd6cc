"""The SQLite index beside the segments (WAL mode): one row per transition, per episode, per segment.

Committing an episode is one transaction: its transitions become part of the buffer all together or not
at all. Rows are never updated except by recovery, which moves positions into a rewritten segment (and
drops the episodes it could not read, numbering the later transitions down so they stay contiguous).

The index can be rebuilt from the segments (`user buffer reindex`), so a missing index beside segments, or
a damaged one, is an error that says so (`MissingIndexError`, `IndexDamagedError`), never an empty buffer or
a traceback; rows are type-checked as they are read.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, fields
from operator import attrgetter
from pathlib import Path
from typing import Any

from user.buffer.errors import BufferIndexError
from user.buffer.index_rows import (
    COLUMN_SELECT,
    EPISODE_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENTS_DIR,
    TRANSITION_COLUMNS,
    IndexDamagedError,
    MissingIndexError,
    episode_row,
    has_segments,
    reindex_hint,
    segment_row,
    transition_row,
)
from user.buffer.rows import EpisodeRow, SegmentRow, TransitionQuery, TransitionRow
from user.buffer.segments import Position

__all__ = [
    "COLUMN_SELECT",
    "INDEX_FILE",
    "SEGMENTS_DIR",
    "EpisodeRow",
    "Index",
    "IndexDamagedError",
    "MissingIndexError",
    "SegmentRow",
    "TransitionQuery",
    "TransitionRow",
]

INDEX_FILE = "index.sqlite3"
FORMAT_VERSION = "1"
BUSY_TIMEOUT_S = 10.0
# what SQLite (or Python's sqlite3, for text) says about a file whose bytes are not what it wrote
_DAMAGE_MESSAGES = ("malformed", "not a database", "Could not decode to UTF-8")

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


class Index:
    """One connection to the index; its methods are safe to call from several threads.

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
        self.directory = directory
        self.path = directory / file_name
        self.read_only = read_only
        self._lock = threading.RLock()
        if not fresh and not self.path.exists():
            if has_segments(directory):
                raise MissingIndexError(
                    f"{self.path}: no index here, but {directory / SEGMENTS_DIR} holds segments; "
                    f"{reindex_hint(directory)}"
                )
            if read_only:
                raise BufferIndexError(f"{self.path}: no index here (is {directory} a buffer directory?)")
        try:
            self._connect(durable)
        except BaseException:
            if getattr(self, "_db", None) is not None:
                self._db.close()
            raise

    def _connect(self, durable: bool) -> None:
        read_only = self.read_only
        with self._errors("cannot open the index"):
            if read_only:
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

    def _check_format(self) -> None:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone()
        if row is None or row[0] != FORMAT_VERSION:
            raise BufferIndexError(
                f"{self.path}: index format {row[0] if row else 'unknown'}, expected {FORMAT_VERSION}"
            )

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """SQLite's errors as typed ones: a damaged file says how to rebuild it; a broken constraint stays as it is."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise
        except UnicodeDecodeError as exc:  # a text column whose bytes were overwritten
            raise IndexDamagedError(
                f"{self.path}: {what}: it is damaged (text that is not UTF-8: {exc.reason}); "
                f"{reindex_hint(self.directory)}"
            ) from exc
        except sqlite3.DatabaseError as exc:
            text = repr(str(exc))[1:-1]  # one line, whatever bytes a damaged row put in it
            name = str(getattr(exc, "sqlite_errorname", ""))
            if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or any(m in text for m in _DAMAGE_MESSAGES):
                raise IndexDamagedError(
                    f"{self.path}: {what}: it is damaged ({text}); {reindex_hint(self.directory)}"
                ) from exc
            raise BufferIndexError(f"{self.path}: {what} ({text})") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # none open (BEGIN failed), or the file is beyond rolling back
            self._db.execute("ROLLBACK")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back if the body raises."""
        with self._lock, self._errors("write failed"):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside see one consistent state, even while another process commits (WAL read transaction)."""
        with self._lock, self._errors("read failed"):
            self._db.execute("BEGIN")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._errors(f"query failed: {sql}"):
            return self._db.execute(sql, args).fetchall()

    def scalar(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = self.fetchall(sql, args)
        return rows[0][0] if rows else None

    # ------------------------------------------------------------------------------------------ segments

    def segments(self) -> list[SegmentRow]:
        return [segment_row(r, self.path) for r in self.fetchall(f"SELECT {SEGMENT_COLUMNS} FROM segments ORDER BY id")]

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
            episode_row(r, self.path)
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
        return [transition_row(r, self.path) for r in self.fetchall(sql + " ORDER BY idx", args)]

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
        where, args = query.where()
        sql = f"SELECT idx FROM transitions{where} ORDER BY idx"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [int(r[0]) for r in self.fetchall(sql, args)]

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
