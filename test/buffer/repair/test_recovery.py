"""Crash recovery, in process: the writer is stopped at named points of its protocol (a fault hook raises),
abandoned without closing, and the files are damaged the ways a crash or a power loss leaves them."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer, StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.repair.quarantine import QUARANTINE_DIR
from user.buffer.rows import TransitionRow


class Crash(BaseException):
    """Stands for the process dying at a fault point."""


def _hook(point: str, after: int = 1) -> Callable[[str], None]:
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            seen["n"] += 1
            if seen["n"] >= after:
                raise Crash(point)

    return hook


def _config(fsync: str = "episode") -> BufferConfig:
    return BufferConfig(storage=StorageConfig(segment_max_episodes=3, fsync=fsync), prefetch=0)  # type: ignore[arg-type]


_abandoned: list[ReplayBuffer] = []  # kept alive: a dead process closes nothing


def _abandon(buf: ReplayBuffer) -> None:
    assert buf._lock_fd is not None
    os.close(buf._lock_fd)  # the kernel releases the lock of a dead process
    buf._lock_fd = None
    _abandoned.append(buf)


def _write(buf: ReplayBuffer, first: int, count: int) -> None:
    for e in range(first, first + count):
        for t in episode("arm", e, 3):
            buf.add(t)


def _reopen(path: Path, **kw: object) -> ReplayBuffer:
    buf = ReplayBuffer.open(path, _config(), **kw)  # type: ignore[arg-type]
    assert buf.verify().ok, buf.verify().problems
    return buf


def test_unfinished_segment_gets_a_footer_and_keeps_every_committed_episode(tmp_path: Path) -> None:
    buf = ReplayBuffer.open(tmp_path, _config())
    _write(buf, 0, 5)  # segment 0 closed after 3, segment 1 open with 2
    _abandon(buf)
    with _reopen(tmp_path) as again:
        assert again.recovery is not None and again.recovery.rewritten == ["seg_000001"]
        assert len(again) == 15 and again.info().episodes == 5 and again.info().segments_open == 0
        _write(again, 5, 1)  # writing continues in a new segment
    assert (tmp_path / "segments" / "seg_000001" / "metadata.yaml").exists()


def test_partial_episode_at_the_tail_is_dropped_whole(tmp_path: Path) -> None:
    buf = ReplayBuffer.open(tmp_path, _config())
    _write(buf, 0, 2)
    _abandon(buf)
    path = segment_path(tmp_path, "seg_000000")
    data = path.read_bytes()
    with open(path, "ab") as f:
        f.write(data[len(data) // 2 : len(data) // 2 + 3000])  # half a record of garbage, as a cut write leaves
    with _reopen(tmp_path) as again:
        assert len(again) == 6 and again.recovery is not None and again.recovery.rewritten == ["seg_000000"]


def test_crash_between_segment_write_and_index_commit(tmp_path: Path) -> None:
    buf = ReplayBuffer.open(tmp_path, _config(), fault_hook=_hook("episode:written", after=4))
    with pytest.raises(Crash):
        _write(buf, 0, 5)
    _abandon(buf)
    with _reopen(tmp_path) as again:
        # episode 3 was in its segment but never committed: not in the buffer; its segment held nothing else
        assert again.info().episodes == 3
        assert again.recovery is not None and again.recovery.removed == ["seg_000001"]


@pytest.mark.parametrize("point", ["roll:finished", "roll:metadata", "roll:closed"])
def test_crash_in_the_middle_of_a_segment_roll(tmp_path: Path, point: str) -> None:
    buf = ReplayBuffer.open(tmp_path, _config(), fault_hook=_hook(point))
    with pytest.raises(Crash):
        _write(buf, 0, 4)
    _abandon(buf)
    with _reopen(tmp_path) as again:
        assert again.info().episodes == 3 and len(again) == 9
        _write(again, 3, 4)
        assert again.info().episodes == 7


@pytest.mark.parametrize("point", ["recover:rewritten", "recover:indexed"])
def test_crash_during_recovery_is_finished_by_the_next_open(tmp_path: Path, point: str) -> None:
    buf = ReplayBuffer.open(tmp_path, _config())
    _write(buf, 0, 2)
    _abandon(buf)
    with pytest.raises(Crash):
        ReplayBuffer.open(tmp_path, _config(), fault_hook=_hook(point))
    # the dead opener's lock died with it: flock locks belong to the open file, which the exception closed
    with _reopen(tmp_path) as again:
        assert again.info().episodes == 2 and again.info().segments_open == 0


def test_power_loss_without_fsync_drops_unreadable_episodes(tmp_path: Path) -> None:
    buf = ReplayBuffer.open(tmp_path, _config(fsync="never"))
    _write(buf, 0, 2)
    _abandon(buf)
    path = segment_path(tmp_path, "seg_000000")
    rows = buf.storage.index.transitions(start=3)
    with open(path, "r+b") as f:
        f.truncate(rows[1].offset + 10)  # the disk never got the rest of episode 1
    with _reopen(tmp_path) as again:
        assert again.recovery is not None and again.recovery.dropped_episodes == 1
        assert again.info().episodes == 1 and len(again) == 3


def _closed_buffer(path: Path) -> list[TransitionRow]:
    """Seven episodes of three steps: two closed segments of three, one of one; returns the index rows."""
    with ReplayBuffer.open(path, _config()) as buf:
        _write(buf, 0, 7)
        return buf.storage.index.transitions()


def _quarantined_file(path: Path) -> Path:
    [folder] = (path / QUARANTINE_DIR).iterdir()
    [kept] = folder.glob("*.mcap")
    return kept


def test_a_truncated_closed_segment_is_noticed_on_open_and_its_readable_episodes_kept(tmp_path: Path) -> None:
    """Issue 13, finding 6: a closed segment cut short was not noticed when the buffer was opened for writing
    (its episodes failed only when sampled). Now opening finds it (size, footer), keeps every readable episode,
    and keeps the original bytes in quarantine."""
    rows = _closed_buffer(tmp_path)
    path = segment_path(tmp_path, "seg_000000")
    closed = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(rows[7].offset + 10)  # inside the last episode of the first segment
    original = path.read_bytes()
    with _reopen(tmp_path) as again:
        report = again.recovery
        assert report is not None and report.damaged == ["seg_000000"] and report.lost == {"seg_000000": [2]}
        assert report.kept == {"seg_000000": 2} and report.rewritten == ["seg_000000"]
        assert len(again) == 18 and again.info().episodes == 6
        assert [t.episode_id for t in again.get(list(range(0, 18, 3)))] == [0, 1, 3, 4, 5, 6]
    kept = _quarantined_file(tmp_path)
    assert kept.read_bytes() == original
    why = (kept.parent / "why.txt").read_text().splitlines()
    closing = f"seg_000000_0.mcap holds {len(original)} bytes, {closed} when it was closed"
    assert why[0] == f"segment seg_000000 was closed, but {closing}"
    assert why[1].startswith("segment seg_000000: kept 2 of 3 committed episodes (6 transitions); lost 1 unreadable: ")


@pytest.mark.parametrize("damage", ["appended", "footer", "missing"])
def test_a_changed_closed_segment_is_salvaged(tmp_path: Path, damage: str) -> None:
    _closed_buffer(tmp_path)
    path = segment_path(tmp_path, "seg_000001")
    if damage == "appended":
        with open(path, "ab") as f:
            f.write(b"\0" * 100)
    elif damage == "footer":
        data = bytearray(path.read_bytes())
        data[-3] ^= 0xFF  # in the closing magic: same size, no footer
        path.write_bytes(bytes(data))
    else:
        path.unlink()
    with _reopen(tmp_path) as again:
        report = again.recovery
        assert report is not None and report.damaged == ["seg_000001"]
        expected = 7 if damage != "missing" else 4
        assert again.info().episodes == expected and len(again) == 3 * expected
        assert again.get([len(again) - 1])[0].episode_id == 6  # later segments are numbered down and still read
        assert len(report.quarantined) == (damage != "missing")
        _write(again, 7, 1)
        assert again.verify().ok


def test_a_crash_while_salvaging_a_closed_segment_is_finished_by_the_next_open(tmp_path: Path) -> None:
    rows = _closed_buffer(tmp_path)
    path = segment_path(tmp_path, "seg_000000")
    data = bytearray(path.read_bytes())
    data[rows[1].offset + 100] ^= 0x01  # inside the first episode: the later ones move up in the rewrite
    path.write_bytes(bytes(data) + b"\0" * 10)  # and no longer the size it was closed at
    with pytest.raises(Crash):
        ReplayBuffer.open(tmp_path, _config(), fault_hook=_hook("recover:rewritten"))
    # the rewrite was not committed: the segment, marked open before it, is recovered again from its original
    with _reopen(tmp_path) as again:
        assert again.info().episodes == 6 and again.info().segments_open == 0
        assert again.recovery is not None and again.recovery.lost == {"seg_000000": [0]}
        assert [t.episode_id for t in again.get([0, 3])] == [1, 2]
