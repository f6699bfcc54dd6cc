"""The SQLite index: WAL, one transaction per episode, cheap metadata queries, read-only beside a writer."""

import sqlite3
from pathlib import Path

import pytest

from user.buffer.errors import BufferIndexError
from user.buffer.index import EpisodeRow, Index, TransitionQuery, TransitionRow
from user.buffer.segments import Position


def _commit(index: Index, segment_id: int, episode: int, first: int, steps: int, **flags: bool) -> None:
    rows = [
        TransitionRow(
            index=first + k,
            segment_id=segment_id,
            offset=100 * (first + k),
            length=50,
            episode=episode,
            robot_id=f"arm{episode % 2}",
            task="pick",
            episode_id=episode,
            step=k,
            policy_version=episode,
            wall_ns=1000 + first + k,
            sim_ns=10 + k,
            reward=float(k == steps - 1),
            terminated=k == steps - 1,
            truncated=False,
            intervened=flags.get("intervened", False) and k == 1,
            is_demo=flags.get("demo", False),
            success=k == steps - 1,
        )
        for k in range(steps)
    ]
    ep = EpisodeRow(
        episode, segment_id, f"arm{episode % 2}", "pick", episode, steps, first, True, 1.0, 0, False, episode,
        1000, 2000, Position(1, 2), Position(3, 4),
    )  # fmt: skip
    index.commit_episode(ep, rows, 12345)


def test_wal_and_episode_commit(tmp_path: Path) -> None:
    index = Index(tmp_path)
    assert index.scalar("PRAGMA journal_mode") == "wal"
    seg = index.add_segment("seg_000000", 1)
    _commit(index, seg.id, 0, 0, 3)
    _commit(index, seg.id, 1, 3, 2, demo=True, intervened=True)
    assert index.count() == (5, 2)
    assert index.next_numbers() == (5, 2)
    (segment,) = index.segments()
    assert (segment.state, segment.episodes, segment.transitions, segment.bytes) == ("open", 2, 5, 12345)
    row = index.transitions(3, 4)[0]
    assert (row.index, row.robot_id, row.is_demo, row.position) == (3, "arm1", True, Position(300, 50))
    index.close_segment(seg.id, 999, 5)
    assert index.segments()[0].state == "closed"


def test_episode_commit_is_all_or_nothing(tmp_path: Path) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    _commit(index, seg.id, 0, 0, 3)
    with pytest.raises(sqlite3.IntegrityError):
        _commit(index, seg.id, 1, 2, 3)  # transition 2 exists: the whole episode is refused
    assert index.count() == (3, 1)


def test_queries_by_metadata(tmp_path: Path) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    first = 0
    for ep in range(6):
        _commit(index, seg.id, ep, first, 4, demo=ep < 2, intervened=ep == 4)
        first += 4
    assert index.query(TransitionQuery(is_demo=True)) == list(range(8))
    assert index.query(TransitionQuery(intervened=True)) == [17]
    assert index.query(TransitionQuery(robot_id="arm1", min_policy_version=3)) == list(range(12, 16)) + list(
        range(20, 24)
    )
    assert index.query(TransitionQuery(done=True, is_demo=False)) == [11, 15, 19, 23]
    assert index.query(TransitionQuery(since_wall_ns=1020), limit=2) == [20, 21]
    plan = " ".join(str(r) for r in index.fetchall("EXPLAIN QUERY PLAN SELECT idx FROM transitions WHERE is_demo = 1"))
    assert "transitions_demo" in plan  # answered from an index, not a scan


def test_read_only_connection_sees_commits_of_a_writer(tmp_path: Path) -> None:
    writer = Index(tmp_path)
    seg = writer.add_segment("seg_000000", 1)
    reader = Index(tmp_path, read_only=True)
    assert reader.count() == (0, 0)
    _commit(writer, seg.id, 0, 0, 2)
    assert reader.count() == (2, 1)
    with pytest.raises(BufferIndexError, match="readonly"):
        reader.fetchall("INSERT INTO meta VALUES ('x', 'y')")
    reader.close()
    writer.close()


def test_missing_or_foreign_index_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(BufferIndexError, match="no index here"):
        Index(tmp_path / "none", read_only=True)
    (tmp_path / "index.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(BufferIndexError, match="cannot open the index"):
        Index(tmp_path)


def test_truncate_from_episode(tmp_path: Path) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    for ep in range(3):
        _commit(index, seg.id, ep, 3 * ep, 3)
    index.truncate_from_episode(1)
    assert index.count() == (3, 1)
    assert (index.segments()[0].episodes, index.segments()[0].transitions) == (1, 3)
