"""The message definitions a segment was written with, so that a segment written before a message changed reads.

A segment's MCAP file carries the ros2msg definition of each type it holds in its Schema records; the buffer's
writer registers them before its first message, so they lie at the start of the file (inside its first chunk, in
front of that chunk's first message). `segment_codec` reads them from there and gives the codec for that segment's
bytes: today's codec when they equal today's definitions (every segment written since the last change), else one
built from them (`user.interfaces.evolve`), whose decoded messages the domain conversion reads with defaults for
the fields added since.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from user.buffer.disk.mcapscan import MAGIC, OP_CHUNK, OP_MESSAGE, OP_SCHEMA, RECORD_PREFIX
from user.buffer.disk.segments import TOPICS, reason
from user.buffer.errors import SegmentError
from user.interfaces.codec import Codec
from user.interfaces.evolve import codec_for

HEAD_BYTES = 256 * 1024  # bytes read from a segment's start for its schemas (they take a few KiB)
_PREFIX = struct.Struct("<BQ")
_CHUNK_HEAD = struct.Struct("<QQQI")  # start time, end time, uncompressed size, CRC; then compression, records
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_log = logging.getLogger(__name__)


def _string(buf: bytes, pos: int) -> tuple[bytes, int]:
    (size,) = _U32.unpack_from(buf, pos)
    end = pos + _U32.size + size
    if end > len(buf):
        raise struct.error("a string runs past the bytes read")
    return buf[pos + _U32.size : end], end


def _schemas_in(buf: bytes, pos: int, end: int, out: dict[str, tuple[str, str]]) -> bool:
    """Read the schema records of `buf[pos:end]` into `out` (name -> (encoding, text)); True at the first message
    (every schema the writer registered first is in front of it)."""
    while pos + RECORD_PREFIX <= end:
        opcode, length = _PREFIX.unpack_from(buf, pos)
        body, pos = pos + RECORD_PREFIX, pos + RECORD_PREFIX + length
        if opcode == OP_MESSAGE:
            return True
        if pos > len(buf) and opcode != OP_CHUNK:
            return False  # a record cut by the bytes read
        if opcode == OP_SCHEMA:
            name, at = _string(buf, body + _U16.size)
            encoding, at = _string(buf, at)
            data, _ = _string(buf, at)
            out[name.decode()] = (encoding.decode(), data.decode())
        elif opcode == OP_CHUNK:
            _, at = _string(buf, body + _CHUNK_HEAD.size)  # the compression: none, as the buffer writes
            records = at + _U64.size
            return _schemas_in(buf, records, min(pos, len(buf)), out)
    return False


def leading_definitions(path: Path) -> dict[str, tuple[str, str]]:
    """The definitions (type -> (encoding, text)) in front of the first message of the segment file at `path`;
    empty when its start holds none (a file cut before its first chunk)."""
    try:
        with open(path, "rb") as f:
            buf = f.read(HEAD_BYTES)
    except OSError as exc:
        raise SegmentError(f"{path}: cannot read its message definitions ({reason(exc)})") from exc
    if not buf.startswith(MAGIC):
        raise SegmentError(f"{path}: not an MCAP file (bad magic)")
    out: dict[str, tuple[str, str]] = {}
    try:
        _schemas_in(buf, len(MAGIC), len(buf), out)
    except (struct.error, UnicodeDecodeError) as exc:
        raise SegmentError(f"{path}: its message definitions do not read ({exc})") from exc
    return out


def segment_codec(path: Path, base: Codec, *, salvage: bool = False) -> Codec:
    """The codec for the records of the segment file at `path`: `base` when its definitions of the buffer's own
    types are `base`'s (or it carries none), else one built from them. `SegmentError` names a definition that
    does not read or parse; with `salvage` (repairing a damaged file) such a segment gets `base`, logged."""
    try:
        written = leading_definitions(path)
        own = {name: written[name] for _, name in TOPICS if name in written}
        try:
            return codec_for(own, base)
        except ValueError as exc:
            raise SegmentError(f"{path}: {exc}") from exc
    except SegmentError as exc:
        if not salvage:
            raise
        _log.warning("%s; reading it with today's message definitions", exc)
        return base
