"""The index's SQLite file: its schema and format version, one connection (WAL mode) that several threads share,
transactions, and SQLite's errors as typed ones. What the index holds, and every query of it, is `Index`'s
(`user.buffer.index`)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from user.buffer.errors import BufferIndexError, IndexDamagedError, reindex_hint

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


class IndexFile:
    """One connection to the index file at `path` of buffer `directory` (created, with its schema, unless
    `read_only`); its methods are safe to call from several threads."""

    def __init__(self, directory: Path, path: Path, *, read_only: bool, durable: bool) -> None:
        self.directory = directory
        self.path = path
        self.read_only = read_only
        self._lock = threading.RLock()
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

    def quick_check(self) -> list[str]:
        """What SQLite's quick_check finds (pages, records, constraints): ["ok"] for a sound file."""
        return [str(row[0]) for row in self.fetchall("PRAGMA quick_check")]

    def make_self_contained(self) -> None:
        """Fold the write-ahead log into the file and stop using one: the file alone is the index (to be renamed)."""
        self.fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
        self.fetchall("PRAGMA journal_mode=DELETE")
