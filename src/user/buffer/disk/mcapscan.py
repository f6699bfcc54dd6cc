"""Find where each message record lies in an MCAP file, from its bytes (the MCAP format is public).

The buffer writes chunks without compression, so a message inside a chunk sits at a fixed byte offset
of the file; the index stores that offset and a cache miss reads exactly one record with `pread`.
This scanner is how the writer learns those offsets (it reads back what it just wrote), how `verify` and
recovery find the last whole record of a segment cut short by kill -9, and (in salvage mode, checking each
chunk's CRC) how recovery and `user buffer reindex` tell intact chunks of a damaged segment from damaged ones.
No MCAP reader serves here: `mcap` and `rosbags` give messages, not where their records lie, and `rosbags` refuses
a file without a footer.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

MAGIC = b"\x89MCAP0\r\n"
OP_HEADER = 0x01
OP_FOOTER = 0x02
OP_SCHEMA = 0x03
OP_CHANNEL = 0x04
OP_MESSAGE = 0x05
OP_CHUNK = 0x06
RECORD_PREFIX = 9  # opcode (1) + length (8)
MESSAGE_PREFIX = RECORD_PREFIX + 2 + 4 + 8 + 8  # then channel id, sequence, log time, publish time

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_PREFIX = struct.Struct("<BQ")
_MESSAGE_HEAD = struct.Struct("<HIQQ")
_CHUNK_HEAD = struct.Struct("<QQQI")


class ScanError(ValueError):
    """The bytes do not follow the MCAP record layout (corrupt, or a compressed chunk)."""


@dataclass(frozen=True)
class MessageSpan:
    """Where one message record lies in the file."""

    offset: int  # file offset of the record (its opcode byte)
    channel_id: int
    log_time: int
    length: int  # bytes of the message payload (the CDR data)
    chunk_crc_ok: bool | None = None  # its chunk's CRC matched (None: not checked, or not in a chunk with a CRC)


@dataclass
class ScanResult:
    """Messages found, the channels that name their topics, and where scanning stopped."""

    messages: list[MessageSpan] = field(default_factory=list)
    topics: dict[int, str] = field(default_factory=dict)  # channel id -> topic
    end: int = 0  # file offset just after the last whole top-level record
    footer: bool = False  # the file is finished (a footer record was reached)
    problem: str | None = None  # why scanning stopped before the end of the bytes, if it did
    skipped: list[str] = field(default_factory=list)  # salvage mode: malformed records passed over, and why


@dataclass(frozen=True)
class _Mode:
    check_crc: bool = False
    salvage: bool = False


def _string(buf: memoryview, pos: int) -> tuple[str, int]:
    (n,) = _U32.unpack_from(buf, pos)
    start = pos + 4
    if start + n > len(buf):
        raise ScanError("string runs past its record")
    return bytes(buf[start : start + n]).decode("utf-8"), start + n


def _channel(body: memoryview) -> tuple[int, str]:
    (channel_id,) = _U16.unpack_from(body, 0)
    topic, _ = _string(body, 4)  # skip the schema id
    return channel_id, topic


def _message(body: memoryview, offset: int) -> MessageSpan:
    if len(body) < _MESSAGE_HEAD.size:
        raise ScanError(f"message record at {offset} is too short")
    channel_id, _, log_time, _ = _MESSAGE_HEAD.unpack_from(body, 0)
    return MessageSpan(offset, channel_id, log_time, len(body) - _MESSAGE_HEAD.size)


def chunk_records(body: memoryview, at: int = 0) -> tuple[int, memoryview, int]:
    """(the CRC of its records, the records, the bytes the body holds after its records' length) of an uncompressed
    chunk record's `body` (`at`: the record's file offset, for messages); `ScanError` when it is too short,
    compressed, or claims more records than it holds."""
    if len(body) < _CHUNK_HEAD.size:
        raise ScanError(f"chunk at {at} is too short")
    crc = _CHUNK_HEAD.unpack_from(body, 0)[3]
    compression, pos = _string(body, _CHUNK_HEAD.size)
    if compression:
        raise ScanError(f"chunk at {at} is {compression}-compressed")
    (records_len,) = _U64.unpack_from(body, pos)
    pos += 8
    held = len(body) - pos
    if records_len > held:
        raise ScanError(f"chunk at {at} claims more records than it holds")
    return crc, body[pos : pos + records_len], held


def record_head(buf: memoryview, pos: int) -> tuple[int, int]:
    """(opcode, body length) of the record starting at `buf[pos]`."""
    opcode, length = _PREFIX.unpack_from(buf, pos)
    return int(opcode), int(length)


def schema_of(body: memoryview) -> tuple[str, str, str]:
    """(name, encoding, data as text) of a Schema record's `body`; `ScanError` when a field runs past it."""
    name, at = _string(body, _U16.size)  # after the schema id
    encoding, at = _string(body, at)
    data, _ = _string(body, at)
    return name, encoding, data


def _chunk(body: memoryview, body_offset: int, result: ScanResult, mode: _Mode) -> None:
    """Collect the messages and channels inside an uncompressed chunk whose body starts at `body_offset`.

    With `mode.check_crc`, each message found is marked with whether the chunk's records match its CRC. In
    salvage mode a chunk whose records do not fill it exactly, or end cut, adds nothing (it is not trusted)."""
    at = body_offset - RECORD_PREFIX
    crc, records, held = chunk_records(body, at)
    if mode.salvage and len(records) != held:
        raise ScanError(f"chunk at {at} claims fewer records than it holds")
    pos = len(body) - held
    crc_ok = zlib.crc32(records) == crc if mode.check_crc and crc else None
    inner = ScanResult()
    _records(records, body_offset + pos, inner, inner=True, mode=mode)
    if mode.salvage and inner.problem is not None:
        raise ScanError(f"chunk at {at}: {inner.problem}")
    result.messages.extend(
        MessageSpan(m.offset, m.channel_id, m.log_time, m.length, crc_ok) if crc_ok is not None else m
        for m in inner.messages
    )
    result.topics.update(inner.topics)
    if inner.problem is not None and result.problem is None:
        result.problem = inner.problem


def _records(buf: memoryview, base: int, result: ScanResult, *, inner: bool, mode: _Mode) -> None:
    """Walk the records of `buf` (file offset `base`), filling `result`; stops at a footer or a cut."""
    pos = 0
    while pos < len(buf):
        if pos + RECORD_PREFIX > len(buf):
            result.problem = f"record header cut at byte {base + pos}"
            break
        opcode, length = _PREFIX.unpack_from(buf, pos)
        body_start = pos + RECORD_PREFIX
        if body_start + length > len(buf):
            result.problem = f"record at byte {base + pos} (opcode {opcode:#x}) needs {length} bytes, file ends first"
            break
        body = buf[body_start : body_start + length]
        try:
            _record(opcode, body, base + pos, result, inner=inner, mode=mode)
        except (ScanError, struct.error, UnicodeDecodeError) as exc:
            if not mode.salvage or inner:
                raise
            result.skipped.append(f"record at byte {base + pos} (opcode {opcode:#x}): {exc}")
        pos = body_start + length
        if not inner:
            result.end = base + pos
        if opcode == OP_FOOTER and not inner:
            result.footer = True
            break


def _record(opcode: int, body: memoryview, offset: int, result: ScanResult, *, inner: bool, mode: _Mode) -> None:
    if opcode == OP_MESSAGE:
        result.messages.append(_message(body, offset))
    elif opcode == OP_CHANNEL:
        channel_id, topic = _channel(body)
        result.topics[channel_id] = topic
    elif opcode == OP_CHUNK and not inner:
        _chunk(body, offset + RECORD_PREFIX, result, mode)


def scan(
    data: bytes | memoryview,
    base: int = 0,
    *,
    expect_magic: bool = False,
    check_crc: bool = False,
    salvage: bool = False,
) -> ScanResult:
    """Scan top-level records of `data`, which starts at file offset `base`.

    With `expect_magic`, `data` is a whole file (starting with the MCAP magic). A cut record ends the scan
    with `problem` set and `end` at the last whole record; bytes that do not follow the layout raise
    `ScanError`, except in `salvage` mode, which passes over a malformed record whose length is whole (noted
    in `skipped`) and ends at bytes that are not even that (noted in `problem`). `check_crc` marks every
    message of a chunk with whether the chunk's CRC matches.
    """
    buf = memoryview(data)
    result = ScanResult(end=base)
    start = 0
    if expect_magic:
        if bytes(buf[: len(MAGIC)]) != MAGIC:
            if not salvage:
                raise ScanError("not an MCAP file (bad magic)")
            result.skipped.append("bad magic")
        start = len(MAGIC)
        result.end = base + start
    try:
        _records(buf[start:], base + start, result, inner=False, mode=_Mode(check_crc, salvage))
    except (struct.error, UnicodeDecodeError) as exc:
        raise ScanError(f"malformed record: {exc}") from exc
    return result


@contextlib.contextmanager
def mapped(path: str) -> Iterator[memoryview]:
    """The bytes of the file at `path`, memory-mapped (read-only; a segment of hundreds of MiB stays on disk)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            yield memoryview(b"")
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
            yield view


def scan_file(path: str, *, check_crc: bool = False, salvage: bool = False) -> ScanResult:
    """Scan a whole MCAP file (finished or cut short); see `scan`."""
    with mapped(path) as data:
        return scan(data, expect_magic=True, check_crc=check_crc, salvage=salvage)


def parse_message_record(record: bytes, offset: int) -> tuple[int, bytes]:
    """(channel id, payload) of the message record `record` read from `offset`; `ScanError` if it is not one."""
    if len(record) < MESSAGE_PREFIX:
        raise ScanError(f"only {len(record)} bytes at {offset}, a message record needs {MESSAGE_PREFIX}")
    opcode, length = _PREFIX.unpack_from(record, 0)
    if opcode != OP_MESSAGE:
        raise ScanError(f"opcode {opcode:#x} at {offset}, expected a message record ({OP_MESSAGE:#x})")
    if RECORD_PREFIX + length != len(record):
        raise ScanError(f"message record at {offset} is {RECORD_PREFIX + length} bytes, expected {len(record)}")
    (channel_id,) = _U16.unpack_from(record, RECORD_PREFIX)
    return channel_id, record[MESSAGE_PREFIX:]


FOOTER_RECORD = RECORD_PREFIX + 8 + 8 + 4  # summary start, summary offset start, summary CRC


def has_footer(f: BinaryIO) -> bool:
    """The file ends with a footer record and the closing magic (it was finished, not cut short)."""
    size = f.seek(0, os.SEEK_END)
    if size < 2 * len(MAGIC) + FOOTER_RECORD:
        f.seek(0)
        return False
    f.seek(size - len(MAGIC) - FOOTER_RECORD)
    tail = f.read(len(MAGIC) + FOOTER_RECORD)
    f.seek(0)
    opcode, length = _PREFIX.unpack_from(tail, 0)
    return opcode == OP_FOOTER and length == FOOTER_RECORD - RECORD_PREFIX and tail[-len(MAGIC) :] == MAGIC


def whole_records_end(f: BinaryIO) -> int:
    """File offset just after the last whole top-level record of `f` (record headers only, by seeking)."""
    size = f.seek(0, os.SEEK_END)
    f.seek(0)
    if f.read(len(MAGIC)) != MAGIC:
        raise ScanError("not an MCAP file (bad magic)")
    pos = len(MAGIC)
    while pos + RECORD_PREFIX <= size:
        f.seek(pos)
        opcode, length = _PREFIX.unpack(f.read(RECORD_PREFIX))
        if pos + RECORD_PREFIX + length > size:
            break
        pos += RECORD_PREFIX + int(length)
        if opcode == OP_FOOTER:
            return min(size, pos + len(MAGIC))  # the closing magic follows the footer
    return pos


class WholeRecords(io.RawIOBase):
    """A read-only view of an MCAP file that ends after its last whole record.

    A reader of a file cut by kill -9 then meets a clean end of data instead of a record whose declared
    length runs past the end of the file (which makes stream readers allocate garbage lengths).
    """

    def __init__(self, f: BinaryIO) -> None:
        super().__init__()
        self._f = f
        self.end = whole_records_end(f)
        f.seek(0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self.end - self._f.tell()))
        data = self._f.read(n)
        view[: len(data)] = data
        return len(data)
