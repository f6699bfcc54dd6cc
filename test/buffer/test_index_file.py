"""The index's SQLite file (`user.buffer.index_file`): opening it read-only, its durability setting, a failed
open that leaves nothing half made, and a transaction whose body ended SQLite's transaction itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from user.buffer.errors import BufferIndexError
from user.buffer.index_file import IndexFile


def _made(tmp_path: Path) -> Path:
    path = tmp_path / "index.sqlite"
    IndexFile(tmp_path, path, read_only=False, durable=True).close()
    return path


def test_a_read_only_file_is_read_and_never_written(tmp_path: Path) -> None:
    path = _made(tmp_path)
    index = IndexFile(tmp_path, path, read_only=True, durable=True)
    try:
        assert index.fetchall("SELECT value FROM meta WHERE key = 'format_version'") == [("1",)]
        with pytest.raises(BufferIndexError, match="readonly"), index.transaction() as db:
            db.execute("INSERT INTO meta VALUES ('x', 'y')")
    finally:
        index.close()


@pytest.mark.parametrize(("durable", "level"), [(True, 2), (False, 1)])  # FULL: fsync per commit; NORMAL: not
def test_durable_sets_sqlites_synchronous_level(tmp_path: Path, durable: bool, level: int) -> None:
    index = IndexFile(tmp_path, tmp_path / "index.sqlite", read_only=False, durable=durable)
    try:
        assert index.fetchall("PRAGMA synchronous") == [(level,)]
    finally:
        index.close()


def test_a_file_that_cannot_be_opened_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(BufferIndexError, match="cannot open the index"):
        IndexFile(tmp_path, tmp_path / "missing.sqlite", read_only=True, durable=True)


def test_a_body_that_ended_the_transaction_itself_keeps_its_own_error(tmp_path: Path) -> None:
    """Rolling back after a failed body is best effort: when no transaction is left open, the body's error is the
    one raised (not SQLite's "no transaction is active")."""
    index = IndexFile(tmp_path, _made(tmp_path), read_only=False, durable=False)
    try:
        with pytest.raises(ValueError, match="the body's own"), index.transaction() as db:
            db.execute("ROLLBACK")
            raise ValueError("the body's own")
        with index.transaction() as db:  # and the file takes the next transaction
            db.execute("INSERT INTO meta VALUES ('x', 'y')")
        assert index.fetchall("SELECT value FROM meta WHERE key = 'x'") == [("y",)]
    finally:
        index.close()


def test_sqlite_reports_no_active_transaction_when_rolled_back_twice(tmp_path: Path) -> None:
    """What the test above relies on: SQLite refuses a ROLLBACK with no transaction open."""
    db = sqlite3.connect(tmp_path / "x.sqlite", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="no transaction is active"):
        db.execute("ROLLBACK")
    db.close()
