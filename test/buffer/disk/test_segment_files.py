"""Segment files as rosbag2 and MCAP readers see them: metadata.yaml counts and times, message numbering,
chunking and fsync as configured, a closed or abandoned segment taking nothing more, and errors that say
which file and which byte."""

import errno
import logging
import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from mcap.reader import make_reader

from test.buffer.factories import episode
from test.buffer.full_disk import full_disk
from user import __version__
from user.buffer.disk.mcapscan import MESSAGE_PREFIX, scan, scan_file
from user.buffer.disk.metadata import BagMetadata, FileInfo, TopicInfo, qos_profile_yaml
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import (
    EVENT_TOPIC,
    EVENT_TYPE,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    OutMessage,
    Position,
    SegmentReader,
    SegmentStats,
    segment_metadata,
)
from user.buffer.errors import CorruptRecordError, SegmentError, SegmentWriteError, TruncatedSegmentError
from user.interfaces import default_codec
from user.interfaces.domain import transition_to_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg

CODEC = default_codec()


def _messages(episode_id: int, steps: int, log_ns: int, *, images: bool = True) -> list[OutMessage]:
    """One episode as the writer stores it: START event, transitions, END event, log times from `log_ns` on."""

    def event(kind: EpisodeKind, ns: int) -> OutMessage:
        msg = episode_event_to_msg(EpisodeEvent("arm", "peg_insertion", episode_id, kind, ns), CODEC)
        return OutMessage(EVENT_TOPIC, CODEC.encode(msg), ns)

    transitions = [
        OutMessage(TRANSITION_TOPIC, CODEC.encode(transition_to_msg(t, CODEC)), log_ns + 1 + t.step)
        for t in episode("arm", episode_id, steps, images=images)
    ]
    return [event(EpisodeKind.START, log_ns), *transitions, event(EpisodeKind.END, log_ns + steps + 1)]


def _writer(path: Path, *, chunk_bytes: int = 1 << 20, fsync: tuple[bool, bool] = (False, False)) -> SegmentWriter:
    return SegmentWriter(path, CODEC, chunk_bytes=chunk_bytes, fsync_episodes=fsync[0], fsync_close=fsync[1])


def test_metadata_counts_each_topic_and_spans_the_log_times(tmp_path: Path) -> None:
    """metadata.yaml (what `ros2 bag info` shows) agrees with what was written, also when episodes arrive
    out of log-time order (a re-sent episode is older than the live one before it)."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(1, 4, log_ns=5_000))  # log times 5000 .. 5005
    writer.write_episode(_messages(0, 3, log_ns=2_000))  # 2000 .. 2004: older
    writer.write_episode(_messages(2, 2, log_ns=3_000))  # 3000 .. 3003: neither first nor last
    stats = writer.finish()
    assert stats.counts == {TRANSITION_TOPIC: 9, EVENT_TOPIC: 6} and stats.message_count == 15
    assert (stats.start_ns, stats.end_ns) == (2_000, 5_005)
    qos = qos_profile_yaml()
    assert segment_metadata("s_0.mcap", stats) == BagMetadata(
        storage_identifier="mcap",
        relative_file_paths=("s_0.mcap",),
        topics=(
            TopicInfo(TRANSITION_TOPIC, TRANSITION_TYPE, offered_qos_profiles=qos, message_count=9),
            TopicInfo(EVENT_TOPIC, EVENT_TYPE, offered_qos_profiles=qos, message_count=6),
        ),
        starting_time_ns=2_000,
        duration_ns=3_005,
        message_count=15,
        files=(FileInfo("s_0.mcap", 2_000, 3_005, 15),),
    )
    with open(path, "rb") as f:
        statistics = make_reader(f).get_summary().statistics  # type: ignore[union-attr]
    assert statistics is not None
    assert (statistics.message_start_time, statistics.message_end_time) == (2_000, 5_005)
    assert statistics.message_count == 15


def test_metadata_of_an_empty_segment_starts_at_zero() -> None:
    meta = segment_metadata("s_0.mcap", SegmentStats())
    assert (meta.starting_time_ns, meta.duration_ns, meta.message_count) == (0, 0, 0)
    assert meta.files == (FileInfo("s_0.mcap", 0, 0, 0),)
    assert [t.message_count for t in meta.topics] == [0, 0]


def test_messages_are_numbered_in_write_order_and_the_file_names_its_writer(tmp_path: Path) -> None:
    """rosbag2 readers see sequence numbers 1..n across episodes, publish time = log time, and the header
    says which library (and version) wrote the segment."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    for e in range(2):
        writer.write_episode(_messages(e, 3, log_ns=1_000 * (e + 1), images=False))
    writer.finish()
    with open(path, "rb") as f:
        reader = make_reader(f)
        assert reader.get_header().library == f"user-buffer/{__version__}"
        messages = [m for _, _, m in reader.iter_messages(log_time_order=False)]
    assert [m.sequence for m in messages] == list(range(1, 11))
    assert all(m.publish_time == m.log_time for m in messages)


@pytest.mark.parametrize(("chunk_bytes", "more_chunks_than_episodes"), [(1 << 20, False), (1024, True)])
def test_episodes_fill_uncompressed_chunks_up_to_the_chunk_size(
    tmp_path: Path, chunk_bytes: int, more_chunks_than_episodes: bool
) -> None:
    """Each episode starts a chunk; one larger than the chunk size is split; chunks are never compressed
    (messages stay at the file offsets the index records)."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path, chunk_bytes=chunk_bytes)
    for e in range(3):
        writer.write_episode(_messages(e, 3, log_ns=1_000 * (e + 1)))
    writer.finish()
    with open(path, "rb") as f:
        chunks = make_reader(f).get_summary().chunk_indexes  # type: ignore[union-attr]
    assert (len(chunks) > 3) is more_chunks_than_episodes and len(chunks) >= 3
    assert {c.compression for c in chunks} == {""}


@contextmanager
def _fsyncs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every fsync while inside: (file name, its size at that moment)."""
    seen: list[tuple[str, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append((Path(os.readlink(f"/proc/self/fd/{fd}")).name, os.fstat(fd).st_size))
        real(fd)

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", fsync)
        yield seen


@pytest.mark.parametrize("fsync_episodes", [False, True])
@pytest.mark.parametrize("fsync_close", [False, True])
def test_fsync_follows_the_durability_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync_episodes: bool, fsync_close: bool
) -> None:
    """Each episode is on disk before it is indexed when fsync_episodes; the finished file (footer
    included) is on disk when fsync_close; nothing is fsynced otherwise (fsync=never)."""
    path = tmp_path / "s_0.mcap"
    with _fsyncs(monkeypatch) as seen:
        writer = _writer(path, fsync=(fsync_episodes, fsync_close))
        sizes = []
        for e in range(2):
            writer.write_episode(_messages(e, 2, log_ns=1_000 * (e + 1), images=False))
            sizes.append(writer.bytes_written)
        writer.finish()
    expected = [("s_0.mcap", size) for size in sizes] if fsync_episodes else []
    if fsync_close:
        expected.append(("s_0.mcap", path.stat().st_size))
    assert seen == expected


def test_a_finished_segment_takes_no_more_episodes(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    stats = writer.finish()
    size = path.stat().st_size
    with pytest.raises(SegmentError, match=f"^{path}: segment already closed$"):
        writer.write_episode(_messages(1, 2, log_ns=2_000, images=False))
    assert writer.finish() is stats and stats.message_count == 4  # finishing again changes nothing
    writer.abandon()
    assert path.stat().st_size == size and scan_file(str(path)).footer


def test_an_abandoned_segment_keeps_what_was_written_and_takes_no_more(tmp_path: Path) -> None:
    """What a failed write leaves: the episodes before it, no footer (recovery adds one later)."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    writer.abandon()
    with pytest.raises(SegmentError, match="segment already closed"):
        writer.write_episode(_messages(1, 2, log_ns=2_000, images=False))
    writer.abandon()
    scanned = scan_file(str(path))
    assert not scanned.footer and len(scanned.messages) == 4


class _FullDisk:
    """A stream whose flush fails as on a full disk."""

    def __init__(self, stream: object) -> None:
        self.stream = stream
        self.closed = False

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        self.closed = True
        self.stream.close()  # type: ignore[attr-defined]


def test_a_failing_flush_on_abandon_is_logged_and_the_file_still_closed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Abandon runs while a write error is being handled: it must not raise a second error."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    stream = writer._stream = _FullDisk(writer._stream)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="user.buffer.segments"):
        writer.abandon()
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: flush on abandon failed: [Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}"
    ]
    assert stream.closed


def test_a_segment_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    path.write_bytes(b"someone else's data")
    with pytest.raises(SegmentError, match=f"^{path}: cannot create segment file \\(File exists\\)$"):
        _writer(path)
    assert path.read_bytes() == b"someone else's data"


def test_reader_errors_name_the_file_and_the_byte(tmp_path: Path) -> None:
    missing = tmp_path / "gone_0.mcap"
    with pytest.raises(SegmentError, match=f"^{missing}: cannot open segment file \\(No such file or directory\\)$"):
        SegmentReader(missing)
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    positions = writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    writer.abandon()
    last = positions[-1]
    with open(path, "r+b") as f:
        f.truncate(last.offset + 10)
    with SegmentReader(path) as reader:
        assert reader.path == path
        with pytest.raises(TruncatedSegmentError) as cut:
            reader.read(last)
        assert (cut.value.path, cut.value.offset) == (str(path), last.offset)
        need = MESSAGE_PREFIX + last.length
        assert str(cut.value) == f"{path}: truncated at byte {last.offset}: message needs {need} bytes, only 10 present"
        wrong = Position(positions[1].offset + 1, positions[1].length)
        with pytest.raises(CorruptRecordError) as bad:
            reader.read(wrong)
        assert (bad.value.path, bad.value.offset) == (str(path), wrong.offset)
        assert str(bad.value).startswith(f"{path}: bad record at byte {wrong.offset}: opcode ")
        assert f" at {wrong.offset}, expected a message record" in str(bad.value)


def test_closing_a_reader_twice_closes_its_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s_0.mcap"
    _writer(path).finish()
    closed: list[int] = []
    real = os.close
    reader = SegmentReader(path)
    fd = reader._fd

    def counting_close(n: int) -> None:
        closed.append(n)
        real(n)

    with monkeypatch.context() as m:
        m.setattr(os, "close", counting_close)
        reader.close()
        reader.close()
        with reader:
            pass
    assert closed == [fd]


def _first_chunk_claims_too_much(data: bytes) -> bytes:
    assert data[0] == 0x06  # an episode starts a chunk record: opcode, length, 28 bytes of head, compression ""
    return data[:41] + struct.pack("<Q", 1 << 40) + data[49:]


def _half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _first_message_on_the_other_channel(data: bytes) -> bytes:
    first, second = scan(data).messages[:2]
    at = first.offset + 9  # channel id, after opcode and record length
    return data[:at] + struct.pack("<H", second.channel_id) + data[at + 2 :]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (
            _first_chunk_claims_too_much,
            "cannot read back the episode just written: chunk at [0-9]+ claims more records",
        ),
        (_half, "wrote 4 messages, found [0-3] on reading back"),
        (_first_message_on_the_other_channel, "message at byte [0-9]+ is not the one written there"),
    ],
)
def test_an_episode_that_does_not_read_back_as_written_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Callable[[bytes], bytes], problem: str
) -> None:
    """The writer reads each episode back to learn its positions; if the bytes on disk are not what it
    wrote (a bad disk, a concurrent writer), no position is returned for the index to record."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    real = os.pread
    with monkeypatch.context() as m:
        m.setattr(os, "pread", lambda fd, n, offset: damage(real(fd, n, offset)))
        with pytest.raises(SegmentError, match=f"^{path}: {problem}"):
            writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    writer.abandon()


class _FailingClose(_FullDisk):
    """A full disk as a BufferedWriter meets it: flush fails, and so does close (which still closes the file)."""

    def close(self) -> None:
        super().close()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_abandon_never_raises_and_closes_both_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """issue 13, finding 7: on a full disk a BufferedWriter's close fails like its flush; abandon raised that
    second error, so the writer kept the dead segment and every later episode met 'segment already closed'."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    stream = writer._stream = _FailingClose(writer._stream)  # type: ignore[assignment]
    read_fd = writer._read_fd
    with caplog.at_level(logging.WARNING, logger="user.buffer.segments"):
        writer.abandon()  # must not raise
    assert stream.closed
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(read_fd)  # the read-back descriptor was closed too
    full = f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)}"
    assert caplog.messages == [f"{path}: flush on abandon failed: {full}", f"{path}: closing failed: {full}"]
    with pytest.raises(SegmentError, match="segment already closed"):
        writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    writer.abandon()  # again: nothing to do


def test_a_write_that_fills_the_disk_closes_the_segment_after_its_last_whole_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed episode's bytes (half a chunk on disk) are cut away: the file holds exactly the episodes
    written before, and the error says what happened and where the segment ends."""
    disk = full_disk(monkeypatch)
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    whole = writer.bytes_written
    disk.full = True
    with pytest.raises(SegmentWriteError) as failed:
        writer.write_episode(_messages(1, 3, log_ns=2_000, images=False))
    assert str(failed.value) == (
        f"{path}: cannot write an episode (No space left on device); the segment was closed at byte {whole}, "
        "after its last whole episode"
    )
    assert path.stat().st_size == whole
    scanned = scan_file(str(path))
    assert len(scanned.messages) == 4 and not scanned.footer
    assert writer.stats.message_count == 4  # the failed episode is not counted for metadata.yaml
    with pytest.raises(SegmentError, match="segment already closed"):
        writer.write_episode(_messages(2, 2, log_ns=3_000, images=False))
    writer.abandon()
    assert path.stat().st_size == whole


def test_a_footer_that_fills_the_disk_leaves_the_episodes_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = full_disk(monkeypatch)
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    whole = writer.bytes_written
    disk.full = True
    with pytest.raises(SegmentWriteError, match=f"^{path}: cannot write the footer \\(No space left on device\\)$"):
        writer.finish()
    assert path.stat().st_size == whole and len(scan_file(str(path)).messages) == 4
    writer.abandon()


def test_discarding_the_last_episode_cuts_the_file_back_to_the_one_before(tmp_path: Path) -> None:
    """What the writer does when the index refuses an episode just written: its records must not stay."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    whole = writer.bytes_written
    writer.write_episode(_messages(1, 3, log_ns=2_000, images=False))
    assert writer.bytes_written > whole
    writer.discard_last_episode()
    assert path.stat().st_size == whole and len(scan_file(str(path)).messages) == 4
    with pytest.raises(SegmentError, match="segment already closed"):
        writer.write_episode(_messages(2, 2, log_ns=3_000, images=False))
    writer.discard_last_episode()  # closed: nothing more is cut
    assert path.stat().st_size == whole


def test_a_read_error_of_the_disk_is_a_segment_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    positions = writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    writer.finish()

    def failing(_fd: int, _n: int, _offset: int) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with SegmentReader(path) as reader:
        monkeypatch.setattr(os, "pread", failing)
        with pytest.raises(SegmentError, match=f"^{path}: cannot read byte {positions[1].offset} \\(Input/output"):
            reader.read(positions[1])


def test_a_message_the_mcap_writer_refuses_costs_only_its_episode(tmp_path: Path) -> None:
    """Not only OSError: whatever fails while an episode is written, its bytes go and the error says what."""
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    whole = writer.bytes_written
    bad = _messages(1, 2, log_ns=2_000, images=False)
    bad[2] = OutMessage(bad[2].topic, bad[2].data, -1)  # a log time MCAP cannot hold (unsigned)
    with pytest.raises(SegmentWriteError) as failed:
        writer.write_episode(bad)
    assert str(failed.value) == (
        f"{path}: cannot write an episode (argument out of range); the segment was closed at byte {whole}, after "
        "its last whole episode"
    )
    assert path.stat().st_size == whole and len(scan_file(str(path)).messages) == 4


def test_discarding_before_any_episode_leaves_the_header(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    header = writer.bytes_written
    assert header > 0
    writer.discard_last_episode()
    assert path.stat().st_size == header and path.read_bytes().startswith(b"\x89MCAP0\r\n")


def test_a_file_that_cannot_be_opened_to_read_back_is_a_segment_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s_0.mcap"

    def no_more_files(*_args: object) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(os, "open", no_more_files)
    with pytest.raises(
        SegmentError, match=f"^{path}: cannot open segment file to read back \\(Too many open files\\)$"
    ):
        _writer(path)


def test_a_cut_that_fails_is_logged_and_left_to_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s_0.mcap"
    writer = _writer(path)
    writer.write_episode(_messages(0, 2, log_ns=1_000, images=False))
    start = writer._episode_start

    def read_only_disk(*_args: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "truncate", read_only_disk)
    with caplog.at_level(logging.WARNING, logger="user.buffer.segments"):
        writer.discard_last_episode()  # must not raise
    assert caplog.messages == [f"{path}: cannot cut back to byte {start}: Read-only file system"]
