"""`user buffer reindex`: the index rebuilt from the segments alone, atomically; a missing or damaged index is an error
that says so (issue 13, findings 8 and 12b)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, BufferLockedError, ReplayBuffer, StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.disk.mcapscan import MESSAGE_PREFIX
from user.buffer.errors import BufferError, IndexDamagedError, MissingIndexError
from user.buffer.index import INDEX_FILE, Index
from user.buffer.repair import reindex as reindex_module
from user.buffer.repair.quarantine import QUARANTINE_DIR
from user.buffer.repair.recovery import RECOVERING_SUFFIX
from user.buffer.repair.reindex import reindex
from user.buffer.repair.segment_episodes import segment_episodes
from user.cli.main import main

CONFIG = BufferConfig(storage=StorageConfig(segment_max_episodes=3, fsync="never"), prefetch=0)


def _fill(path: Path, episodes: int = 8, first: int = 0) -> None:
    with ReplayBuffer.open(path, CONFIG) as buf:
        for e in range(first, first + episodes):
            robot = "left" if e % 2 else "right"
            for t in episode(robot, e, 2 + e % 3, demo=e == 0, success=e % 3 == 0, version=e, intervened=e == 5):
                buf.add(t, wall_ns=1000 * e + t.step)


def _rows(path: Path) -> tuple[list[Any], list[Any], list[tuple[Any, ...]]]:
    """Every transition and episode row, and each segment's (name, state, bytes, episodes, transitions)."""
    index = Index(path, read_only=True)
    try:
        segments = [(s.name, s.state, s.bytes, s.episodes, s.transitions) for s in index.segments()]
        return index.transitions(), index.episodes(), segments
    finally:
        index.close()


def _delete_index(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (path / (INDEX_FILE + suffix)).unlink(missing_ok=True)


def test_a_deleted_index_is_an_error_and_reindex_brings_every_episode_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13, finding 8: with its index deleted, a buffer opened as an empty one beside its orphaned segments,
    and nothing could rebuild the index. Now opening is an error naming `user buffer reindex`, which brings back
    every row exactly as the writer made it."""
    _fill(tmp_path)
    before = _rows(tmp_path)
    _delete_index(tmp_path)
    for read_only in (False, True):
        with pytest.raises(MissingIndexError, match=rf"no index here.* `user buffer reindex {tmp_path}`$"):
            ReplayBuffer.open(tmp_path, CONFIG, read_only=read_only)
    assert not (tmp_path / INDEX_FILE).exists()  # the failed open created nothing
    assert main(["buffer", "info", str(tmp_path)]) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR][-1].count("\n") == 0
    assert main(["buffer", "reindex", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "segment seg_000000: 3 episodes (9 transitions)" in out
    assert f"reindexed {tmp_path}: 23 transitions, 8 episodes in 3 segments" in out
    assert _rows(tmp_path) == before
    assert main(["buffer", "verify", str(tmp_path)]) == 0
    with ReplayBuffer.open(tmp_path, CONFIG) as buf:
        assert len(buf) == 23 and buf.recovery is not None and not buf.recovery.changed
        assert [t.episode_id for t in buf.get([0, 22])] == [0, 7]


def test_reindex_keeps_the_old_index_aside_and_replaces_a_damaged_one(tmp_path: Path) -> None:
    _fill(tmp_path)
    before = _rows(tmp_path)
    damaged = bytearray((tmp_path / INDEX_FILE).read_bytes())
    damaged[len(damaged) // 2 :] = b"\xff" * (len(damaged) - len(damaged) // 2)
    (tmp_path / INDEX_FILE).write_bytes(bytes(damaged))
    with pytest.raises(IndexDamagedError):
        ReplayBuffer.open(tmp_path, CONFIG)
    report = reindex(tmp_path)
    assert (report.segments, report.episodes, report.transitions, report.complete) == (3, 8, 23, True)
    [kept] = report.quarantined
    assert (tmp_path / kept / INDEX_FILE).read_bytes() == bytes(damaged)
    assert "replaced it" in (tmp_path / kept / "why.txt").read_text()
    assert _rows(tmp_path) == before


def test_an_unfinished_segment_is_indexed_open_and_recovered_on_the_next_open(tmp_path: Path) -> None:
    _fill(tmp_path, episodes=7)  # the third segment holds one episode
    end = _rows(tmp_path)[1][-1].end_event
    path = segment_path(tmp_path, "seg_000002")
    data = path.read_bytes()
    _delete_index(tmp_path)
    with open(path, "wb") as f:  # what kill -9 leaves: no summary, no footer, the next episode's record cut
        f.write(data[: end.offset + MESSAGE_PREFIX + end.length] + b"\x06" + b"\x00" * 30)
    report = reindex(tmp_path)
    assert report.open_segments == ["seg_000002"] and report.episodes == 7 and not report.complete
    assert any(line.startswith("segment seg_000002: 1 episodes (2 transitions); unfinished") for line in report.lines)
    with ReplayBuffer.open(tmp_path, CONFIG) as buf:
        assert buf.recovery is not None and buf.recovery.rewritten == ["seg_000002"]
        assert buf.info().episodes == 7 and buf.info().segments_open == 0 and buf.verify().ok


def test_an_episode_damaged_in_a_segment_is_left_out_and_the_original_kept(tmp_path: Path) -> None:
    _fill(tmp_path)
    before = _rows(tmp_path)
    row = before[0][4]  # episode 1, step 1 (first segment)
    path = segment_path(tmp_path, "seg_000000")
    data = bytearray(path.read_bytes())
    data[row.offset + MESSAGE_PREFIX + 30] ^= 0x01
    path.write_bytes(bytes(data))
    _delete_index(tmp_path)
    report = reindex(tmp_path)
    assert (report.episodes, report.transitions, report.open_segments) == (7, 20, ["seg_000000"])
    line = next(line for line in report.lines if line.startswith("segment seg_000000"))
    assert "2 episodes (6 transitions); finished, indexed as open" in line
    assert "left out: its chunk does not match its CRC (byte " in line
    [kept] = report.quarantined
    assert (tmp_path / kept / path.name).read_bytes() == bytes(data)
    with ReplayBuffer.open(tmp_path, CONFIG) as buf:
        assert [e.episode_id for e in buf.storage.index.episodes()] == [0, 2, 3, 4, 5, 6, 7]
        assert buf.verify().ok and len(buf) == 20


def test_leftovers_and_strangers_are_set_aside_or_left_alone(tmp_path: Path) -> None:
    _fill(tmp_path, episodes=3)
    _delete_index(tmp_path)
    leftover = segment_path(tmp_path, "seg_000000").with_name("seg_000000_0.mcap" + RECOVERING_SUFFIX)
    leftover.write_bytes(b"half a rewrite")
    (tmp_path / "segments" / "notes").mkdir()
    (tmp_path / "segments" / "seg_000007").mkdir()  # a segment folder without its file
    report = reindex(tmp_path)
    assert report.left_out == ["notes", "seg_000007"] and report.episodes == 3
    assert not leftover.exists() and len(report.quarantined) == 1
    assert (tmp_path / report.quarantined[0] / leftover.name).read_bytes() == b"half a rewrite"
    assert (tmp_path / "segments" / "notes").is_dir()


def test_reindex_needs_the_writer_lock_and_a_segments_folder(tmp_path: Path) -> None:
    _fill(tmp_path, episodes=1)
    with ReplayBuffer.open(tmp_path, CONFIG), pytest.raises(BufferLockedError):
        reindex(tmp_path)
    with pytest.raises(BufferError, match="nothing to rebuild an index from"):
        reindex(tmp_path / "elsewhere")


def test_an_interrupted_reindex_leaves_the_old_index_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path)
    old = (tmp_path / INDEX_FILE).read_bytes()
    real: Callable[..., Any] = segment_episodes
    calls = {"n": 0}

    def dies_on_the_second(path: Path, codec: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(path, codec)

    monkeypatch.setattr(reindex_module, "segment_episodes", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        reindex(tmp_path)
    assert (tmp_path / INDEX_FILE).read_bytes() == old and not (tmp_path / QUARANTINE_DIR).exists()
    monkeypatch.setattr(reindex_module, "segment_episodes", real)
    assert reindex(tmp_path).episodes == 8 and not os.path.exists(tmp_path / (INDEX_FILE + ".rebuild"))
