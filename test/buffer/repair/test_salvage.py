"""`salvage.copy_readable` on damaged segments: which committed episodes it copies into the rewrite, what the copy
holds, and, for each one it leaves out, that the reason names the segment file, the byte of the bad record and why.

A segment here is the open one a writer left when it died: two episodes of three steps (each step a transition and
its two camera frames), all in one file without a footer. Damage inside a chunk either breaks the chunk's CRC or,
with `_reseal`, is vouched for by it (what the writer itself would have written); `_no_chunk_crcs` makes the
salvage decode every message and compare it with its index row instead.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer.config import StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.disk.mcapscan import MAGIC, MESSAGE_PREFIX, OP_CHUNK, RECORD_PREFIX, MessageSpan, scan_file
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.index import Index
from user.buffer.repair.quarantine import QUARANTINE_DIR
from user.buffer.repair.recovery import recover
from user.buffer.repair.salvage import Copied, copy_readable, crc_verdicts
from user.buffer.rows import EpisodeRow, TransitionRow
from user.buffer.storage import DiskStorage
from user.buffer.writer import EpisodeWriter
from user.interfaces import default_codec

CODEC = default_codec()
CONFIG = StorageConfig(cache_size=100, fsync="never", segment_max_episodes=10)
SEG0 = "seg_000000"
WRIST, FRONT = "/arm/wrist/image/compressed", "/arm/front/image/compressed"  # the test episodes' camera topics
PER_EPISODE = 1 + 3 * 3 + 2 + 1  # START, three transitions with two frames each, the last next frames, END
BAD_CRC = "its chunk's bytes do not match its CRC"
CHANNEL_TOPIC_AT = RECORD_PREFIX + 2 + 2 + 4  # a channel record: prefix, id, schema id, topic length, topic


def _segment(directory: Path, episodes: int = 2, *, demo: bool = False) -> Path:
    """`episodes` committed episodes of 3 steps in the open segment of a writer that died (no footer)."""
    index = Index(directory, durable=False)
    w = EpisodeWriter(DiskStorage(directory, index, CODEC, CONFIG), CONFIG)
    for e in range(episodes):
        w.add_episode(episode("arm", e, 3, demo=demo))
    assert w._segment is not None
    w._segment.abandon()  # what kill -9 leaves
    w.storage.close()
    index.close()
    return segment_path(directory, SEG0)


def _rows(directory: Path) -> tuple[list[EpisodeRow], list[TransitionRow]]:
    """The index's episode and transition rows of the segment."""
    index = Index(directory, durable=False)
    try:
        return index.episodes(), index.transitions()
    finally:
        index.close()


def _copy(directory: Path) -> tuple[Copied, Path]:
    """`copy_readable` of the segment into a new file (finished); what it copied, and that file."""
    out = directory / "copy.mcap"
    episodes, transitions = _rows(directory)
    rows: dict[int, list[TransitionRow]] = {}
    for row in transitions:
        rows.setdefault(row.episode, []).append(row)
    writer = SegmentWriter(out, CODEC, chunk_bytes=1 << 20, fsync_episodes=False, fsync_close=False)
    try:
        copy = copy_readable(segment_path(directory, SEG0), episodes, rows, writer, CODEC)
    finally:
        writer.finish()
    return copy, out


def _contents(path: Path) -> list[tuple[str, bytes]]:
    """Every message of the (intact) file `path`, in file order: its topic and payload."""
    scanned = scan_file(str(path))
    data = path.read_bytes()
    return [
        (scanned.topics[m.channel_id], data[m.offset + MESSAGE_PREFIX : m.offset + MESSAGE_PREFIX + m.length])
        for m in scanned.messages
    ]


def _messages(path: Path) -> list[MessageSpan]:
    return scan_file(str(path)).messages


def _damage(path: Path, offset: int, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + len(new)] = new
    path.write_bytes(bytes(data))


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def _reseal(path: Path) -> None:
    """Give every chunk of `path` the CRC of the bytes it holds now: its damage reads as what the writer wrote."""
    data = bytearray(path.read_bytes())
    pos = len(MAGIC)
    while pos + RECORD_PREFIX <= len(data):
        opcode, length = struct.unpack_from("<BQ", data, pos)
        body = pos + RECORD_PREFIX
        if opcode == OP_CHUNK and body + length <= len(data):
            (compression,) = struct.unpack_from("<I", data, body + 28)  # after start, end, size, CRC
            records = body + 32 + compression + 8
            struct.pack_into("<I", data, body + 24, zlib.crc32(data[records : body + length]))
        pos = body + length
    path.write_bytes(bytes(data))


def _no_chunk_crcs(path: Path) -> None:
    """Make the file's header record claim more bytes than the file has: a scan stops there, so no chunk CRC
    vouches for any message and every one is decoded and compared with its row."""
    _damage(path, len(MAGIC) + 1, (1 << 40).to_bytes(8, "little"))
    assert crc_verdicts(path) == {}


def _channel_record(path: Path, topic: str) -> int:
    """The offset of the channel record of `topic`."""
    return path.read_bytes().find(topic.encode()) - CHANNEL_TOPIC_AT


def _frame_after(path: Path, offset: int, topic: str) -> MessageSpan:
    """The camera frame on `topic` in the group of the transition record at `offset`."""
    scanned = scan_file(str(path))
    return next(m for m in scanned.messages if m.offset > offset and scanned.topics[m.channel_id] == topic)


def test_an_intact_segment_is_copied_message_for_message(tmp_path: Path) -> None:
    path = _segment(tmp_path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {} and copy.transitions == 6
    assert _contents(out) == _contents(path) and len(_contents(out)) == 2 * PER_EPISODE
    episodes, transitions = _rows(tmp_path)
    assert [r for r, _ in copy.rows] == [r.index for r in transitions]
    assert [e for e, _, _ in copy.events] == [e.episode for e in episodes]


def test_demonstrations_decoded_without_a_crc_match_their_rows(tmp_path: Path) -> None:
    """Each decoded transition is compared with its row, its demonstration flag too: a demonstration is kept."""
    path = _segment(tmp_path, demo=True)
    before = _contents(path)
    _no_chunk_crcs(path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {} and copy.transitions == 6 and _contents(out) == before


def test_a_transition_record_overwritten_by_another_is_reported_with_its_file_and_byte(tmp_path: Path) -> None:
    path = _segment(tmp_path)
    before = _contents(path)
    _, rows = _rows(tmp_path)
    assert rows[3].length == rows[4].length  # step 0 of episode 1 written over its step 1
    data = path.read_bytes()
    record = MESSAGE_PREFIX + rows[3].length
    _damage(path, rows[4].offset, data[rows[3].offset : rows[3].offset + record])
    _no_chunk_crcs(path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {
        1: f"{path}: bad record at byte {rows[4].offset}: holds ('arm', 1, 0, False), not transition 4"
    }
    assert copy.transitions == 3 and _contents(out) == before[:PER_EPISODE]


@pytest.mark.parametrize(("kind", "episode_no"), [("START", 1), ("END", 0)])
def test_an_event_record_that_is_not_the_episodes_own_is_reported(tmp_path: Path, kind: str, episode_no: int) -> None:
    """Episode 1's START overwritten by episode 0's, or episode 0's END by its START."""
    path = _segment(tmp_path)
    before = _contents(path)
    episodes, _ = _rows(tmp_path)
    source = episodes[0].start_event
    target = episodes[1].start_event if kind == "START" else episodes[0].end_event
    assert source.length == target.length
    data = path.read_bytes()
    _damage(path, target.offset, data[source.offset : source.offset + MESSAGE_PREFIX + source.length])
    _no_chunk_crcs(path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {
        episode_no: f"{path}: bad record at byte {target.offset}: not the {kind} of episode {episode_no}"
    }
    kept = before[PER_EPISODE:] if episode_no == 0 else before[:PER_EPISODE]
    assert _contents(out) == kept and [e for e, _, _ in copy.events] == [1 - episode_no]


def test_a_payload_that_does_not_decode_is_reported_with_its_file_and_byte(tmp_path: Path) -> None:
    path = _segment(tmp_path)
    _no_chunk_crcs(path)
    _, rows = _rows(tmp_path)
    _damage(path, rows[4].offset + MESSAGE_PREFIX, b"\x7f")  # the CDR encapsulation header
    copy, _ = _copy(tmp_path)
    assert list(copy.lost) == [1]
    assert copy.lost[1].startswith(f"{path}: bad record at byte {rows[4].offset}: cannot decode ")


def test_a_chunk_whose_crc_does_not_match_loses_its_episode_as_recovery_reports(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A flipped bit inside a transition's payload still decodes; the chunk's CRC finds it. The reason names the
    file and the first record of the episode read from that chunk (its START), in the copy and in recovery's log
    and quarantine note."""
    path = _segment(tmp_path)
    episodes, rows = _rows(tmp_path)
    _flip(path, rows[4].offset + MESSAGE_PREFIX + 40)
    why = f"{path}: bad record at byte {episodes[1].start_event.offset}: {BAD_CRC}"
    copy, _ = _copy(tmp_path)
    assert copy.lost == {1: why} and copy.transitions == 3
    index = Index(tmp_path, durable=False)
    try:
        with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
            report = recover(tmp_path, index, CODEC, CONFIG)
    finally:
        index.close()
    assert report.lost == {SEG0: [1]} and report.kept == {SEG0: 1}
    assert f"lost 1 unreadable: episode 1: {why}; original bytes kept in" in caplog.text
    [folder] = (tmp_path / QUARANTINE_DIR).iterdir()
    assert f"episode 1: {why}" in (folder / "why.txt").read_text()


def test_frames_whose_channel_record_was_lost_are_copied_on_their_cameras_topics(tmp_path: Path) -> None:
    """The wrist channel's record no longer reads as one (its chunk's CRC made to match): the frames on that
    channel are told apart by decoding them, and the copy puts them on the wrist camera's topic again."""
    path = _segment(tmp_path)
    before = _contents(path)
    _damage(path, _channel_record(path, WRIST), b"\x7f")  # an opcode no reader knows
    _reseal(path)
    assert WRIST not in scan_file(str(path), salvage=True).topics.values()
    copy, out = _copy(tmp_path)
    assert copy.lost == {} and _contents(out) == before
    assert [topic for topic, _ in _contents(out)].count(WRIST) == 2 * 4


def test_a_frame_on_a_lost_channel_that_does_not_decode_is_reported_with_its_file_and_byte(tmp_path: Path) -> None:
    path = _segment(tmp_path)
    before = _contents(path)
    _, rows = _rows(tmp_path)
    frame = _frame_after(path, rows[4].offset, WRIST)
    _damage(path, _channel_record(path, WRIST), b"\x7f")
    _damage(path, frame.offset + MESSAGE_PREFIX, b"\x7f")  # its CDR encapsulation header
    _reseal(path)
    copy, out = _copy(tmp_path)
    assert list(copy.lost) == [1] and _contents(out) == before[:PER_EPISODE]
    prefix = f"{path}: bad record at byte {frame.offset}: not a camera frame: cannot decode "
    assert copy.lost[1].startswith(prefix)


def test_a_frame_its_chunks_crc_vouches_for_is_copied_as_it_is_on_its_channels_topic(tmp_path: Path) -> None:
    """Where the chunk's CRC matches, a frame is not decoded: its bytes go to the topic of its channel unchanged
    (here bytes no reader decodes, as the CRC says the writer wrote them)."""
    path = _segment(tmp_path)
    _, rows = _rows(tmp_path)
    frame = _frame_after(path, rows[4].offset, FRONT)
    _damage(path, frame.offset + MESSAGE_PREFIX, b"\x7f")
    _reseal(path)
    after = _contents(path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {} and _contents(out) == after
    damaged = path.read_bytes()[frame.offset + MESSAGE_PREFIX : frame.offset + MESSAGE_PREFIX + frame.length]
    assert damaged[0] == 0x7F and (FRONT, damaged) in _contents(out)


@pytest.mark.parametrize("where", ["the segment's first message", "the first transition after a START"])
def test_a_message_moved_to_an_unknown_channel_loses_only_its_episode(tmp_path: Path, where: str) -> None:
    """A record on no channel the scan knows, before any transition or right after an event, belongs to no
    transition's frames; its chunk's CRC no longer matches, so its episode is lost and the other one copied."""
    path = _segment(tmp_path)
    before = _contents(path)
    episodes, rows = _rows(tmp_path)
    damaged, lost = (episodes[0].start_event.offset, 0) if where.startswith("the segment") else (rows[3].offset, 1)
    if lost == 0:
        assert _messages(path)[0].offset == damaged
    _damage(path, damaged + RECORD_PREFIX, (99).to_bytes(2, "little"))  # its channel id
    copy, out = _copy(tmp_path)
    start = episodes[lost].start_event.offset
    assert copy.lost == {lost: f"{path}: bad record at byte {start}: {BAD_CRC}"}
    assert _contents(out) == (before[PER_EPISODE:] if lost == 0 else before[:PER_EPISODE])


def _bad_magic(path: Path) -> None:
    _damage(path, 1, b"X")


def _malformed_channel(path: Path) -> None:
    """The wrist channel record's topic claims more bytes than the record holds: its whole chunk (episode 0's,
    where the channels are announced) is passed over by a salvage scan."""
    _damage(path, _channel_record(path, WRIST) + CHANNEL_TOPIC_AT - 4, (1 << 30).to_bytes(4, "little"))


@pytest.mark.parametrize("damage", [_bad_magic, _malformed_channel])
def test_records_a_strict_scan_refuses_are_passed_over_and_every_episode_copied(
    tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    """A damaged magic, or a malformed record inside a chunk: a scan in salvage mode goes on past it, and every
    episode is copied (those it found no CRC for decoded and compared with their rows, their frames too)."""
    path = _segment(tmp_path)
    before = _contents(path)
    verdicts = crc_verdicts(path)
    damage(path)
    copy, out = _copy(tmp_path)
    assert copy.lost == {} and copy.transitions == 6 and _contents(out) == before
    after = crc_verdicts(path)
    if damage is _bad_magic:
        assert after == verdicts
    else:
        episodes, _ = _rows(tmp_path)
        second = episodes[1].start_event.offset  # only the second chunk is still vouched for
        assert after == {k: v for k, v in verdicts.items() if k >= second} and set(after.values()) == {True}


def test_a_segment_cut_inside_an_episode_reports_the_record_that_runs_past_its_end(tmp_path: Path) -> None:
    path = _segment(tmp_path)
    before = _contents(path)
    _, rows = _rows(tmp_path)
    size = rows[4].offset + 10
    with open(path, "r+b") as f:
        f.truncate(size)
    copy, out = _copy(tmp_path)
    assert copy.lost == {
        1: f"{path}: truncated at byte {rows[4].offset}: a message of {rows[4].length} bytes there runs past the end "
        f"({size})"
    }
    assert _contents(out) == before[:PER_EPISODE] and copy.transitions == 3
