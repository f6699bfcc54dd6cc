"""The message definitions a segment was written with, so that a segment written before a message changed reads.

A segment's MCAP file carries the ros2msg definition of each type it holds in its Schema records; the buffer's
writer registers them before its first message, so they lie at the start of the file (inside its first chunk, in
front of that chunk's first message). They are trusted once that chunk matches its CRC: a definition read from
damaged bytes may still parse, and would decode every record of the segment wrongly. `segment_codec` gives the
codec for a segment's bytes: today's codec when its definitions equal today's (every segment written since the
last change) or cannot be trusted (salvage: its records are then checked one by one, as any damaged segment's),
else one built from them (`user.interfaces.evolve`), whose decoded messages the domain conversion reads with
defaults for the fields added since.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

from user.buffer.disk.mcapscan import (
    MAGIC,
    OP_CHUNK,
    OP_MESSAGE,
    OP_SCHEMA,
    RECORD_PREFIX,
    ScanError,
    chunk_records,
    record_head,
    schema_of,
)
from user.buffer.disk.segments import TOPICS, reason
from user.buffer.errors import SegmentError
from user.interfaces.codec import Codec
from user.interfaces.evolve import codec_for

HEAD_BYTES = 256 * 1024  # bytes read from a segment's start for its schemas (they take a few KiB)
_log = logging.getLogger(__name__)


def _chunk_schemas(body: memoryview, path: Path, out: dict[str, tuple[str, str]]) -> None:
    """The schemas in front of the first message of the chunk `body`, once its records match the chunk's CRC: a
    definition read from damaged bytes could still parse, and would then decode every record of the segment
    wrongly."""
    try:
        crc, records, _ = chunk_records(body)
    except ScanError as exc:
        why = f"its first chunk is cut short or damaged ({exc})"
        raise SegmentError(f"{path}: {why}: its message definitions cannot be checked") from exc
    if crc and zlib.crc32(records) != crc:
        raise SegmentError(f"{path}: its first chunk does not match its CRC: its message definitions are not trusted")
    pos = 0
    while pos + RECORD_PREFIX <= len(records):
        opcode, length = record_head(records, pos)
        if opcode == OP_MESSAGE:
            return
        if opcode == OP_SCHEMA:
            name, encoding, text = schema_of(records[pos + RECORD_PREFIX : pos + RECORD_PREFIX + length])
            out[name] = (encoding, text)
        pos += RECORD_PREFIX + length


def _definitions(f: BinaryIO, path: Path) -> dict[str, tuple[str, str]]:
    head = memoryview(f.read(HEAD_BYTES))
    if bytes(head[: len(MAGIC)]) != MAGIC:
        raise SegmentError(f"{path}: not an MCAP file (bad magic)")
    out: dict[str, tuple[str, str]] = {}
    pos = len(MAGIC)
    while pos + RECORD_PREFIX <= len(head):
        opcode, length = record_head(head, pos)
        body, pos = pos + RECORD_PREFIX, pos + RECORD_PREFIX + length
        if opcode == OP_MESSAGE:
            break
        if opcode == OP_CHUNK:  # the writer's first chunk: read whole (it may run past the head) to check its CRC
            if pos > os.fstat(f.fileno()).st_size:  # a length past the file's end: cut, or a damaged length
                raise SegmentError(f"{path}: its first chunk is cut short: its message definitions cannot be checked")
            f.seek(body)
            _chunk_schemas(head[body:pos] if pos <= len(head) else memoryview(f.read(length)), path, out)
            break
        if pos > len(head):
            break  # a record cut by the bytes read
        if opcode == OP_SCHEMA:
            name, encoding, text = schema_of(head[body:pos])
            out[name] = (encoding, text)
    return out


def leading_definitions(path: Path) -> dict[str, tuple[str, str]]:
    """The definitions (type -> (encoding, text)) in front of the first message of the segment file at `path`;
    empty when its start holds none (a file cut before its first chunk). `SegmentError` when they cannot be read
    or trusted (the chunk holding them cut short, or not matching its CRC)."""
    try:
        with open(path, "rb") as f:
            return _definitions(f, path)
    except OSError as exc:
        raise SegmentError(f"{path}: cannot read its message definitions ({reason(exc)})") from exc
    except (ScanError, struct.error, UnicodeDecodeError) as exc:
        raise SegmentError(f"{path}: its message definitions do not read ({exc})") from exc


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
