"""The SQLite index: WAL, one transaction per episode, cheap metadata queries, read-only beside a writer."""

import os
import sqlite3
from pathlib import Path

import pytest

from test.buffer.factories import scalar
from user.buffer.disk.segments import Position
from user.buffer.errors import BufferIndexError, IndexDamagedError, MissingIndexError
from user.buffer.index import Index
from user.buffer.rows import EpisodeRow, TransitionQuery, TransitionRow


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
    assert scalar(index, "PRAGMA journal_mode") == "wal"
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


def _four_episodes(tmp_path: Path) -> tuple[Index, int]:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    for ep in range(4):
        _commit(index, seg.id, ep, 3 * ep, 3)
    return index, seg.id


def test_moving_a_segment_drops_unreadable_episodes_and_numbers_later_transitions_down(tmp_path: Path) -> None:
    index, seg_id = _four_episodes(tmp_path)
    moved = [(9, Position(7000, 51)), (0, Position(10, 52))]  # by the numbers the rows had before
    index.move_segment(seg_id, moved, [(3, Position(1, 1), Position(2, 2))], 4321, 9, dropped=[1])
    rows = index.transitions()
    assert [r.index for r in rows] == list(range(9)) and index.count() == (9, 3)
    assert [(r.episode, r.step) for r in rows] == [
        (0, 0),
        (0, 1),
        (0, 2),
        (2, 0),
        (2, 1),
        (2, 2),
        (3, 0),
        (3, 1),
        (3, 2),
    ]
    assert [r.sim_ns for r in rows] == [10, 11, 12] * 3  # the rows themselves, not just their numbers
    assert rows[6].position == Position(7000, 51) and rows[0].position == Position(10, 52)
    assert rows[3].position == Position(600, 50)  # unmoved rows keep their positions
    eps = index.episodes()
    assert [(e.episode, e.first_index) for e in eps] == [(0, 0), (2, 3), (3, 6)]
    assert (eps[2].start_event, eps[2].end_event) == (Position(1, 1), Position(2, 2))
    [seg] = index.segments()
    assert (seg.state, seg.bytes, seg.closed_ns, seg.episodes, seg.transitions) == ("closed", 4321, 9, 3, 9)
    assert index.next_numbers() == (9, 4)


def test_dropping_episodes_apart_leaves_numbers_contiguous(tmp_path: Path) -> None:
    index, seg_id = _four_episodes(tmp_path)
    with index.transaction() as db:
        db.execute("DELETE FROM transitions WHERE idx = 4")  # episode 1 lost a row: counts follow what is there
    index.move_segment(seg_id, [], [], 1, 2, dropped=[2, 0, 1])
    assert [(r.index, r.episode, r.step) for r in index.transitions()] == [(0, 3, 0), (1, 3, 1), (2, 3, 2)]
    assert [(e.episode, e.first_index) for e in index.episodes()] == [(3, 0)]
    assert (index.segments()[0].episodes, index.segments()[0].transitions) == (1, 3)


def test_deleting_a_segment_numbers_the_next_segments_transitions_down(tmp_path: Path) -> None:
    index = Index(tmp_path)
    first, second = index.add_segment("seg_000000", 1), index.add_segment("seg_000001", 2)
    _commit(index, first.id, 0, 0, 3)
    _commit(index, second.id, 1, 3, 2)
    index.delete_segment(first.id)
    assert [(r.index, r.episode, r.segment_id) for r in index.transitions()] == [(0, 1, second.id), (1, 1, second.id)]
    assert [(e.episode, e.first_index) for e in index.episodes()] == [(1, 0)]
    assert [s.name for s in index.segments()] == ["seg_000001"] and index.count() == (2, 1)


def test_writing_beside_segments_without_an_index_is_a_missing_index_error(tmp_path: Path) -> None:
    (tmp_path / "segments").mkdir()
    Index(tmp_path).close()  # an empty segments/ folder: a new buffer, its index is created
    (tmp_path / "index.sqlite3").unlink()
    (tmp_path / "segments" / "seg_000000").mkdir()
    for read_only in (False, True):
        with pytest.raises(MissingIndexError, match=r"index\.sqlite3: no index here, but .*segments holds segments"):
            Index(tmp_path, read_only=read_only)
    assert not (tmp_path / "index.sqlite3").exists()
    fresh = Index(tmp_path, file_name="rebuilt.sqlite3", fresh=True)  # what `user buffer reindex` builds
    assert fresh.path == tmp_path / "rebuilt.sqlite3" and fresh.count() == (0, 0)
    fresh.close()
    with pytest.raises(BufferIndexError, match="no index here") as exc:
        Index(tmp_path / "elsewhere", read_only=True)
    assert not isinstance(exc.value, MissingIndexError)


def test_a_damaged_file_says_how_to_rebuild_it_and_other_failures_do_not(tmp_path: Path) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    for ep in range(40):
        _commit(index, seg.id, ep, 3 * ep, 3)
    index.close()
    data = bytearray((tmp_path / "index.sqlite3").read_bytes())
    data[len(data) // 2 :] = b"\x00" * (len(data) - len(data) // 2)
    (tmp_path / "index.sqlite3").write_bytes(bytes(data))
    damaged = Index(tmp_path, read_only=True)
    for read in (damaged.transitions, damaged.count, lambda: damaged.query(TransitionQuery(is_demo=True))):
        with pytest.raises(IndexDamagedError, match=rf"is damaged \(.*\); rebuild .*`user buffer reindex {tmp_path}`$"):
            read()
    with pytest.raises(IndexDamagedError), damaged.snapshot():
        damaged.transitions()
    assert damaged.fetchall("SELECT 1") == [(1,)]  # the failed snapshot was ended: the connection still works
    damaged.close()
    (tmp_path / "index.sqlite3").write_bytes(b"\xff" * 4096)
    with pytest.raises(IndexDamagedError, match=r"cannot open the index: it is damaged \(file is not a database\)"):
        Index(tmp_path)


def test_a_failed_write_is_rolled_back_and_typed(tmp_path: Path) -> None:
    index = Index(tmp_path)
    with (
        pytest.raises(BufferIndexError, match=r"write failed \(no such table: nowhere\)$") as exc,
        index.transaction() as db,
    ):
        db.execute("INSERT INTO meta VALUES ('k', 'v')")
        db.execute("INSERT INTO nowhere VALUES (1)")
    assert not isinstance(exc.value, IndexDamagedError)
    assert scalar(index, "SELECT COUNT(*) FROM meta WHERE key = 'k'") == 0
    with pytest.raises(KeyboardInterrupt), index.transaction() as db:
        db.execute("INSERT INTO meta VALUES ('k', 'v')")
        raise KeyboardInterrupt
    assert scalar(index, "SELECT COUNT(*) FROM meta WHERE key = 'k'") == 0
    index.add_segment("seg_000000", 1)  # no transaction was left open
    with pytest.raises(BufferIndexError, match=r"query failed: SELECT missing FROM meta \(no such column: missing\)$"):
        index.fetchall("SELECT missing FROM meta")


def test_reopening_a_segment_marks_it_open_again(tmp_path: Path) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    other = index.add_segment("seg_000001", 2)
    index.close_segment(seg.id, 999, 5)
    index.close_segment(other.id, 888, 6)
    index.reopen_segment(seg.id)
    assert [(s.state, s.closed_ns, s.bytes) for s in index.segments()] == [("open", None, 999), ("closed", 6, 888)]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE transitions SET robot_id = X'07' WHERE idx = 1", r"transition row 1 holds b'\\x07' in column 5"),
        ("UPDATE transitions SET step = 'x' WHERE idx = 2", r"transition row 2 holds 'x' in column 8"),
        ("UPDATE transitions SET reward = X'00' WHERE idx = 0", r"transition row 0 holds b'\\x00' in column 12"),
        ("UPDATE transitions SET offset = -1 WHERE idx = 0", r"transition 0 points at byte -1, 50 bytes"),
        ("UPDATE transitions SET length = 1 << 32 WHERE idx = 0", r"transition 0 points at byte 0, 4294967296 bytes"),
        ("UPDATE episodes SET start_length = -2", r"episode 0 points at byte 1, -2 bytes"),
        ("UPDATE episodes SET end_offset = -3", r"episode 0 points at byte -3, 4 bytes"),
        ("UPDATE episodes SET task = X'15'", r"episode row 0 holds b'\\x15' in column 3"),
        ("UPDATE segments SET name = '../../x'", r"segment row 1 names '../../x' \('open'\)"),
        ("UPDATE segments SET closed_ns = 'soon'", r"segment row 1 holds 'soon' in column 4"),
    ],
)
def test_a_row_holding_what_no_row_can_hold_is_a_damaged_index(tmp_path: Path, sql: str, message: str) -> None:
    index = Index(tmp_path)
    seg = index.add_segment("seg_000000", 1)
    _commit(index, seg.id, 0, 0, 3)
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("PRAGMA ignore_check_constraints = ON")
    db.execute(sql)
    db.commit()
    db.close()
    with pytest.raises(IndexDamagedError, match=message + r".*`user buffer reindex "):
        index.transitions()
        index.episodes()
        index.segments()


def test_text_that_is_not_utf8_is_a_damaged_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    index.add_segment("seg_000000", 1)
    index.fetchall("UPDATE segments SET name = CAST(X'80ff0a' AS TEXT)")
    with pytest.raises(IndexDamagedError, match=r"it is damaged \(Could not decode to UTF-8 column 'name'") as exc:
        index.segments()
    assert "\n" not in str(exc.value)


def test_a_schema_overwritten_with_bytes_that_are_not_utf8_is_a_damaged_index(tmp_path: Path) -> None:
    """SQLite quotes the bad schema text in its error, which Python then cannot decode (UnicodeDecodeError)."""
    Index(tmp_path).close()
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("PRAGMA writable_schema=ON")
    sql = b"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) \x80\xff"
    db.execute("UPDATE sqlite_master SET sql = CAST(? AS TEXT) WHERE name = 'meta'", (sql,))
    db.commit()
    db.close()
    for read_only in (False, True):
        with pytest.raises(IndexDamagedError, match=r"cannot open the index: it is damaged \(text that is not UTF-8: "):
            Index(tmp_path, read_only=read_only)


def test_a_failed_open_leaves_no_connection_behind(tmp_path: Path) -> None:
    Index(tmp_path).close()
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("UPDATE meta SET value = '0' WHERE key = 'format_version'")
    db.commit()
    db.close()

    def open_files() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if str(tmp_path) in str(Path(os.readlink(fd)) if fd.exists() else ""))

    for read_only in (False, True):
        with pytest.raises(BufferIndexError, match="index format 0, expected 1"):
            Index(tmp_path, read_only=read_only)
        assert open_files() == 0
