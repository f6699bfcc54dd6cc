"""The index round trip: every field written comes back as written, and the connection settings that make
commits durable, readable beside a writer and usable from several threads."""

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import fields, replace
from pathlib import Path

import pytest

from test.buffer.factories import scalar
from user.buffer.disk.segments import Position
from user.buffer.errors import BufferIndexError
from user.buffer.index import Index
from user.buffer.index_file import BUSY_TIMEOUT_S
from user.buffer.rows import EpisodeRow, SegmentRow, TransitionQuery, TransitionRow

DEADLINE_S = 10.0
Flags = tuple[bool, bool, bool, bool, bool]  # terminated, truncated, intervened, is_demo, success


def _rows(segment_id: int, episode: int, first: int, flags: list[Flags]) -> list[TransitionRow]:
    """Transitions whose every field differs from its neighbours', so a column read back from the wrong
    place, or not at all, cannot go unnoticed."""
    return [
        TransitionRow(
            index=first + k,
            segment_id=segment_id,
            offset=1000 * segment_id + 100 * k + 7,
            length=50 + k,
            episode=episode,
            robot_id=f"robot{episode}",
            task=f"task{episode}",
            episode_id=40 + episode,
            step=k,
            policy_version=5 + episode + k,
            wall_ns=10_000 + 10 * (first + k),
            sim_ns=20_000 + 3 * (first + k),
            reward=0.25 * (k + 1) - episode,
            terminated=t,
            truncated=u,
            intervened=i,
            is_demo=d,
            success=s,
        )
        for k, (t, u, i, d, s) in enumerate(flags)
    ]


EPISODE_0 = EpisodeRow(
    episode=0, segment_id=1, robot_id="robot0", task="task0", episode_id=40, steps=3, first_index=0,
    success=True, episode_return=1.5, interventions=1, is_demo=False, policy_version=7,
    start_wall_ns=9_000, end_wall_ns=9_300, start_event=Position(11, 22), end_event=Position(933, 44),
)  # fmt: skip
EPISODE_1 = EpisodeRow(
    episode=1, segment_id=2, robot_id="robot1", task="task1", episode_id=41, steps=2, first_index=3,
    success=False, episode_return=-0.75, interventions=2, is_demo=True, policy_version=9,
    start_wall_ns=19_000, end_wall_ns=19_100, start_event=Position(55, 66), end_event=Position(777, 88),
)  # fmt: skip
ROWS_0 = _rows(
    1, 0, 0, [(False, False, True, False, False), (False, True, False, True, False), (True, False, False, False, True)]
)
ROWS_1 = _rows(2, 1, 3, [(False, False, False, True, True), (False, True, True, True, False)])
ALL_ROWS = ROWS_0 + ROWS_1


def _filled(directory: Path) -> Index:
    """Two segments (ids 1 and 2) with one episode each: episode 0 (3 steps), episode 1 (2 steps)."""
    index = Index(directory)
    index.add_segment("seg_000000", 111)
    index.add_segment("seg_000001", 222)
    index.commit_episode(EPISODE_0, ROWS_0, 4096)
    index.commit_episode(EPISODE_1, ROWS_1, 8192)
    return index


def _types(row: object) -> list[type]:
    return [type(getattr(row, f.name)) for f in fields(row)]  # type: ignore[arg-type]


def test_every_episode_and_transition_field_reads_back_as_written(tmp_path: Path) -> None:
    """Reward, success, task, demo flag, policy version, positions ...: what samplers and filters rely on."""
    index = _filled(tmp_path)
    assert index.episodes() == [EPISODE_0, EPISODE_1]
    assert index.transitions() == ALL_ROWS
    for got, want in zip([*index.episodes(), *index.transitions()], [EPISODE_0, EPISODE_1, *ALL_ROWS], strict=True):
        assert _types(got) == _types(want), got  # flags come back as bools, rewards and returns as floats
    assert index.episodes(segment_id=2) == [EPISODE_1]
    assert index.episodes(segment_id=1) == [EPISODE_0]
    assert index.transitions(segment_id=1) == ROWS_0
    assert index.transitions(1, 4) == ALL_ROWS[1:4]
    assert index.transitions(1, 4, segment_id=2) == ROWS_1[:1]
    assert index.transitions(start=2) == ALL_ROWS[2:]
    index.close()
    reader = Index(tmp_path, read_only=True)  # what another process reads back
    assert reader.episodes() == [EPISODE_0, EPISODE_1] and reader.transitions() == ALL_ROWS
    reader.close()


def test_segment_rows_count_what_was_committed(tmp_path: Path) -> None:
    index = Index(tmp_path)
    added = index.add_segment("seg_000000", 111)
    assert added == SegmentRow(1, "seg_000000", "open", 111, None, 0, 0, 0)
    assert index.segments() == [added]  # what add_segment returns is what the index holds
    second = index.add_segment("seg_000001", 222)
    assert second == SegmentRow(2, "seg_000001", "open", 222, None, 0, 0, 0) and index.segments() == [added, second]
    index.commit_episode(EPISODE_0, ROWS_0, 4096)
    index.commit_episode(EPISODE_1, ROWS_1, 8192)
    index.close_segment(1, 5000, 333)
    assert index.segments() == [
        SegmentRow(1, "seg_000000", "closed", 111, 333, 5000, 1, 3),
        SegmentRow(2, "seg_000001", "open", 222, None, 8192, 1, 2),
    ]


def test_column_rows_counts_and_next_numbers(tmp_path: Path) -> None:
    """The bulk load on open, and where the next commit continues numbering."""
    index = Index(tmp_path)
    assert index.count() == (0, 0) and index.next_numbers() == (0, 0) and index.column_rows(0) == []
    index.close()
    index = _filled(tmp_path)
    expected = [
        (r.index, r.segment_id, r.offset, r.length, r.episode, r.step, r.policy_version, r.wall_ns, r.reward,
         int(r.is_demo), int(r.intervened), int(r.terminated or r.truncated), int(r.success), r.task)
        for r in ALL_ROWS
    ]  # fmt: skip
    assert index.column_rows(0) == expected
    assert index.column_rows(3) == expected[3:]
    assert index.count() == (5, 2)
    assert index.next_numbers() == (5, 2)


QUERIES = [  # (query, limit, transitions expected)
    (TransitionQuery(), None, [0, 1, 2, 3, 4]),
    (TransitionQuery(robot_id="robot1"), None, [3, 4]),
    (TransitionQuery(task="task0"), None, [0, 1, 2]),
    (TransitionQuery(is_demo=True), None, [1, 3, 4]),
    (TransitionQuery(is_demo=False), None, [0, 2]),
    (TransitionQuery(intervened=True), None, [0, 4]),
    (TransitionQuery(success=True), None, [2, 3]),
    (TransitionQuery(done=True), None, [1, 2, 4]),
    (TransitionQuery(done=False, is_demo=True), None, [3]),
    (TransitionQuery(min_policy_version=7), None, [2, 4]),
    (TransitionQuery(max_policy_version=6), None, [0, 1, 3]),
    (TransitionQuery(since_wall_ns=10_020), None, [2, 3, 4]),
    (TransitionQuery(episode=1), None, [3, 4]),
    (TransitionQuery(is_demo=True), 2, [1, 3]),
]


def test_queries_select_by_every_filter(tmp_path: Path) -> None:
    index = _filled(tmp_path)
    for query, limit, expected in QUERIES:
        assert index.query(query, limit=limit) == expected, query


def test_scalar_reads_one_value_or_none(tmp_path: Path) -> None:
    index = _filled(tmp_path)
    assert scalar(index, "SELECT name FROM segments WHERE id = ?", [2]) == "seg_000001"
    assert scalar(index, "SELECT name FROM segments WHERE id = ?", [99]) is None


def test_moved_segment_points_at_the_new_positions(tmp_path: Path) -> None:
    """Recovery's rewrite: only positions change, and the segment is closed with its new size."""
    index = _filled(tmp_path)
    moved = [(r.index, Position(r.offset + 5000, r.length)) for r in ROWS_0]
    index.move_segment(1, moved, [(0, Position(1, 22), Position(2, 44))], 7777, 444)
    assert index.transitions(segment_id=1) == [replace(r, offset=r.offset + 5000) for r in ROWS_0]
    assert index.transitions(segment_id=2) == ROWS_1
    (ep0, ep1) = index.episodes()
    assert (ep0.start_event, ep0.end_event) == (Position(1, 22), Position(2, 44)) and ep1 == EPISODE_1
    assert index.segments()[0] == SegmentRow(1, "seg_000000", "closed", 111, 444, 7777, 1, 3)


def test_dropping_and_deleting_keep_the_counts_right(tmp_path: Path) -> None:
    index = _filled(tmp_path)
    index.move_segment(2, [], [], 8192, 5, dropped=[1])
    assert index.count() == (3, 1) and index.next_numbers() == (3, 1)
    assert [(s.episodes, s.transitions) for s in index.segments()] == [(1, 3), (0, 0)]
    index.commit_episode(EPISODE_1, ROWS_1, 8192)
    index.delete_segment(2)
    assert [s.id for s in index.segments()] == [1]
    assert index.episodes() == [EPISODE_0] and index.transitions() == ROWS_0


# ---------------------------------------------------------------------------------------------- connection


@pytest.mark.parametrize(("durable", "synchronous"), [(None, 2), (True, 2), (False, 1)])
def test_durable_index_syncs_fully(tmp_path: Path, durable: bool | None, synchronous: int) -> None:
    """A durable index (the default; fsync=episode) survives power loss: synchronous FULL (2), else NORMAL (1)."""
    index = Index(tmp_path) if durable is None else Index(tmp_path, durable=durable)
    assert scalar(index, "PRAGMA synchronous") == synchronous
    assert scalar(index, "PRAGMA journal_mode") == "wal"


@pytest.mark.parametrize("read_only", [False, True])
def test_both_modes_wait_for_another_writer_up_to_the_busy_timeout(tmp_path: Path, read_only: bool) -> None:
    Index(tmp_path).close()
    index = Index(tmp_path, read_only=read_only)
    assert index.read_only is read_only
    assert scalar(index, "PRAGMA busy_timeout") == int(BUSY_TIMEOUT_S * 1000)


def test_a_briefly_held_write_lock_delays_a_commit_instead_of_failing_it(tmp_path: Path) -> None:
    index = Index(tmp_path)
    other = sqlite3.connect(tmp_path / "index.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process is in the middle of a write
    trying = threading.Event()
    index._db.set_trace_callback(lambda sql: trying.set() if sql == "BEGIN IMMEDIATE" else None)
    with ThreadPoolExecutor(1) as pool:
        added = pool.submit(index.add_segment, "seg_000000", 1)
        assert trying.wait(DEADLINE_S)
        other.execute("COMMIT")
        assert added.result(timeout=DEADLINE_S).name == "seg_000000"
    assert [s.name for s in index.segments()] == ["seg_000000"]
    other.close()


def test_one_connection_serves_several_threads(tmp_path: Path) -> None:
    """The writer commits from its own thread while samplers read from theirs; a reader is shared too."""
    index = Index(tmp_path)
    index.add_segment("seg_000000", 111)
    index.add_segment("seg_000001", 222)
    reader = Index(tmp_path, read_only=True)
    with ThreadPoolExecutor(2) as pool:
        pool.submit(index.commit_episode, EPISODE_0, ROWS_0, 4096).result(timeout=DEADLINE_S)
        assert pool.submit(reader.count).result(timeout=DEADLINE_S) == (3, 1)
        pool.submit(index.commit_episode, EPISODE_1, ROWS_1, 8192).result(timeout=DEADLINE_S)
        assert pool.submit(reader.transitions).result(timeout=DEADLINE_S) == ALL_ROWS
    assert index.count() == reader.count() == (5, 2)


def test_read_only_index_reads_but_refuses_writes(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    reader = Index(tmp_path, read_only=True)
    assert reader.read_only and reader.count() == (5, 2)
    assert scalar(reader, "PRAGMA journal_mode") == "wal"
    with pytest.raises(BufferIndexError, match="write failed .*readonly"):
        reader.add_segment("seg_000002", 333)
    with pytest.raises(BufferIndexError, match="write failed .*readonly"):
        reader.commit_episode(EPISODE_1, [], 0)
    assert [s.name for s in reader.segments()] == ["seg_000000", "seg_000001"] and reader.count() == (5, 2)


def test_an_index_of_another_format_is_refused_with_both_versions_named(tmp_path: Path) -> None:
    Index(tmp_path).close()
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("UPDATE meta SET value = '2' WHERE key = 'format_version'")
    db.commit()
    for read_only in (False, True):
        with pytest.raises(BufferIndexError, match=r"index\.sqlite3: index format 2, expected 1$"):
            Index(tmp_path, read_only=read_only)
    db.execute("DELETE FROM meta WHERE key = 'format_version'")
    db.commit()
    db.close()
    with pytest.raises(BufferIndexError, match=r"index\.sqlite3: index format unknown, expected 1$"):
        Index(tmp_path, read_only=True)
