"""The MCAP scanner's salvage mode: chunk CRCs checked, malformed records passed over and named, never raised."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from test.buffer.factories import episode
from user.buffer.disk.mcapscan import (
    MAGIC,
    MESSAGE_PREFIX,
    OP_CHANNEL,
    OP_CHUNK,
    RECORD_PREFIX,
    ScanError,
    scan,
    scan_file,
)
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import EVENT_TOPIC, TRANSITION_TOPIC, OutMessage
from user.interfaces import default_codec
from user.interfaces.domain import transition_to_msg

CODEC = default_codec()


def _segment(path: Path, episodes: int = 3, *, finish: bool = True) -> bytes:
    """A segment with one chunk per episode (two transitions and an event each), finished or left as a crash
    leaves it (its schemas and channels then only in the first chunk, no summary repeating them)."""
    writer = SegmentWriter(path, CODEC, chunk_bytes=1 << 20, fsync_episodes=False, fsync_close=False)
    for e in range(episodes):
        ts = episode("arm", e, 2, images=False)
        writer.write_episode(
            [OutMessage(TRANSITION_TOPIC, CODEC.encode(transition_to_msg(t, CODEC)), 10 + t.step) for t in ts]
            + [OutMessage(EVENT_TOPIC, b"\x00\x01\x00\x00", 20)]
        )
    if finish:
        writer.finish()
    else:
        writer.abandon()
    return path.read_bytes()


def _chunks(data: bytes) -> list[int]:
    """Offsets of the top-level chunk records."""
    found, pos = [], len(MAGIC)
    while pos + RECORD_PREFIX <= len(data):
        opcode, length = struct.unpack_from("<BQ", data, pos)
        if opcode == OP_CHUNK:
            found.append(pos)
        pos += RECORD_PREFIX + length
    return found


def test_crcs_are_checked_only_when_asked_and_mark_each_message_of_a_chunk(tmp_path: Path) -> None:
    data = bytearray(_segment(tmp_path / "s.mcap"))
    plain = scan(bytes(data), expect_magic=True)
    assert len(plain.messages) == 9 and {m.chunk_crc_ok for m in plain.messages} == {None}
    assert {m.chunk_crc_ok for m in scan(bytes(data), expect_magic=True, check_crc=True).messages} == {True}
    second = plain.messages[3]  # the second chunk's first message
    data[second.offset + MESSAGE_PREFIX + second.length // 2] ^= 0x01
    checked = scan(bytes(data), expect_magic=True, check_crc=True)
    assert [m.chunk_crc_ok for m in checked.messages] == [True] * 3 + [False] * 3 + [True] * 3
    assert [m.offset for m in checked.messages] == [m.offset for m in plain.messages]


def test_a_chunk_without_a_crc_is_not_judged(tmp_path: Path) -> None:
    data = bytearray(_segment(tmp_path / "s.mcap"))
    crc_at = _chunks(bytes(data))[1] + RECORD_PREFIX + 24
    data[crc_at : crc_at + 4] = b"\0\0\0\0"  # a writer that computes no CRC stores 0
    verdicts = [m.chunk_crc_ok for m in scan(bytes(data), expect_magic=True, check_crc=True).messages]
    assert verdicts == [True] * 3 + [None] * 3 + [True] * 3


def test_salvage_passes_over_a_malformed_record_that_the_strict_scan_refuses(tmp_path: Path) -> None:
    data = bytearray(_segment(tmp_path / "s.mcap"))
    chunk = _chunks(bytes(data))[1]
    data[chunk + RECORD_PREFIX + 28 + 3] = 0xFF  # the compression name's length: runs past the chunk
    with pytest.raises(ScanError, match="string runs past its record"):
        scan(bytes(data), expect_magic=True)
    salvaged = scan(bytes(data), expect_magic=True, check_crc=True, salvage=True)
    assert len(salvaged.messages) == 6 and salvaged.footer and salvaged.problem is None
    assert salvaged.skipped == [f"record at byte {chunk} (opcode {OP_CHUNK:#x}): string runs past its record"]


def test_salvage_trusts_no_message_of_a_chunk_whose_records_do_not_fill_it(tmp_path: Path) -> None:
    data = bytearray(_segment(tmp_path / "s.mcap", finish=False))
    chunk = _chunks(bytes(data))[0]
    length_at = chunk + RECORD_PREFIX + 28 + 4
    (records,) = struct.unpack_from("<Q", data, length_at)
    struct.pack_into("<Q", data, length_at, records - 1)
    assert len(scan(bytes(data), expect_magic=True).messages) == 8  # the strict scan reads what it can
    salvaged = scan(bytes(data), expect_magic=True, salvage=True)
    assert len(salvaged.messages) == 6 and "claims fewer records than it holds" in salvaged.skipped[0]
    assert salvaged.topics == {}  # the channels were in that chunk: not trusted either


def test_a_channel_whose_topic_is_not_text_is_passed_over(tmp_path: Path) -> None:
    body = struct.pack("<HH", 1, 1) + struct.pack("<I", 2) + b"\xff\xfe"
    data = MAGIC + struct.pack("<BQ", OP_CHANNEL, len(body)) + body
    with pytest.raises(ScanError, match="malformed record"):
        scan(data, expect_magic=True)
    salvaged = scan(data, expect_magic=True, salvage=True)
    assert salvaged.topics == {} and salvaged.skipped[0].startswith(f"record at byte 8 (opcode {OP_CHANNEL:#x}): ")


def test_files_that_are_no_mcap_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "empty.mcap"
    empty.write_bytes(b"")
    with pytest.raises(ScanError, match="bad magic"):
        scan_file(str(empty))
    assert scan_file(str(empty), salvage=True).skipped == ["bad magic"]
    path = tmp_path / "s.mcap"
    _segment(path)
    assert len(scan_file(str(path), check_crc=True, salvage=True).messages) == 9  # memory-mapped, whole
