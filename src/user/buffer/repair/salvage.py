"""Salvage: the committed episodes of a segment that can still be read, copied into the segment's rewrite.

Each committed episode is read at its indexed positions: where a chunk's CRC covers a message, the CRC vouches for
it (and for the camera frames the scan found after a transition, in the same chunk); where none does, the message
is decoded and compared with its index row, and a transition's frames are read after its record by the count it
waits for (`user.buffer.disk.camera_topics`). An episode with any message that fails is left out, with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from user.buffer.disk.camera_topics import camera_topic, frame_from_payload, read_frames
from user.buffer.disk.mcapscan import MessageSpan, ScanResult, scan_file
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import (
    EVENT_TOPIC,
    EVENT_TYPE,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    WRITER_CHANNELS,
    OutMessage,
    Position,
    SegmentReader,
    read_within,
)
from user.buffer.errors import CorruptRecordError, SegmentError
from user.buffer.rows import EpisodeRow, TransitionRow
from user.interfaces.codec import Codec, DecodeError
from user.interfaces.domain import transition_from_msg
from user.interfaces.episode_events import EpisodeKind


@dataclass
class Copied:
    """Committed episodes of one segment copied into its rewrite, and those that could not be read."""

    rows: list[tuple[int, Position]] = field(default_factory=list)  # transition number -> new position
    events: list[tuple[int, Position, Position]] = field(default_factory=list)  # episode -> START, END
    transitions: int = 0
    lost: dict[int, str] = field(default_factory=dict)  # episode -> why it is unreadable


def copy_readable(
    path: Path, episodes: list[EpisodeRow], rows: dict[int, list[TransitionRow]], writer: SegmentWriter, codec: Codec
) -> Copied:
    """Copy every readable committed episode of `path` into `writer`, in order; note why each other one is not."""
    scanned = scan_file(str(path), check_crc=True, salvage=True)
    check = _Check(codec, _verdicts(scanned), path.stat().st_size, _frame_groups(scanned), scanned.topics)
    copy = Copied()
    with SegmentReader(path) as reader:
        for ep in episodes:
            ep_rows = rows.get(ep.episode, [])
            try:
                messages = _episode_messages(reader, ep, ep_rows, check)
            except SegmentError as exc:
                copy.lost[ep.episode] = str(exc)
                continue
            positions = writer.write_episode(messages)
            copy.events.append((ep.episode, positions[0], positions[-1]))
            copy.rows.extend((r.index, p) for r, p in zip(ep_rows, positions[1:-1], strict=True))
            copy.transitions += len(ep_rows)
    return copy


@dataclass(frozen=True)
class _Check:
    codec: Codec
    crc: dict[int, bool]  # message record offset -> whether its chunk's CRC matched
    size: int  # of the file
    frames: dict[int, list[MessageSpan]]  # transition record offset -> the camera frames right after it
    topics: dict[int, str]  # channel id -> topic, where the scan found the channel


def _verdicts(scanned: ScanResult) -> dict[int, bool]:
    return {m.offset: m.chunk_crc_ok for m in scanned.messages if m.chunk_crc_ok is not None}


def crc_verdicts(path: Path) -> dict[int, bool]:
    """For every message record of `path` inside a chunk with a CRC: whether the chunk's bytes match it."""
    return _verdicts(scan_file(str(path), check_crc=True, salvage=True))


def _frame_groups(scanned: ScanResult) -> dict[int, list[MessageSpan]]:
    """For each transition record the scan found: the messages on other topics (its camera frames) up to the next
    transition or event (a channel whose record was lost counts as a camera's)."""
    topics = {**WRITER_CHANNELS, **scanned.topics}
    groups: dict[int, list[MessageSpan]] = {}
    head: list[MessageSpan] = []  # the group being filled (frames before any transition: none are written)
    for m in scanned.messages:
        topic = topics.get(m.channel_id)
        if topic == TRANSITION_TOPIC:
            head = groups[m.offset] = []
        elif topic == EVENT_TOPIC:
            head = []
        else:
            head.append(m)
    return groups


def _episode_messages(
    reader: SegmentReader, ep: EpisodeRow, rows: list[TransitionRow], check: _Check
) -> list[OutMessage]:
    """The messages of committed episode `ep`, read at its indexed positions; `SegmentError` says why not."""
    if len(rows) != ep.steps:
        raise SegmentError(f"episode {ep.episode} has {len(rows)} transition rows, expected {ep.steps}")
    out = [OutMessage(EVENT_TOPIC, _event(reader, ep, EpisodeKind.START, check), ep.start_wall_ns)]
    for row in rows:
        payload, msg = _read(reader, row.position, check, TRANSITION_TYPE)
        if msg is not None:
            got = (str(msg.robot_id), int(msg.episode_id), int(msg.step), bool(msg.is_demo))
            if got != (row.robot_id, row.episode_id, row.step, row.is_demo):
                raise CorruptRecordError(str(reader.path), row.offset, f"holds {got}, not transition {row.index}")
        out.append(OutMessage(TRANSITION_TOPIC, payload, row.wall_ns))
        out.extend(_frames(reader, row, msg, check))
    out.append(OutMessage(EVENT_TOPIC, _event(reader, ep, EpisodeKind.END, check), ep.end_wall_ns))
    return out


def _frames(reader: SegmentReader, row: TransitionRow, msg: Any, check: _Check) -> list[OutMessage]:
    """The camera frames after transition `row`'s record (`camera_topics`), to be written after it again: as the
    scan found them where a chunk's CRC vouches for the record (`msg` None; the frames are in its chunk), else
    read after the record by the count its decoded message `msg` waits for, and checked against it."""
    where = str(reader.path)
    out: list[OutMessage] = []
    if msg is None:
        for m in check.frames[row.offset]:
            payload = read_within(reader, Position(m.offset, m.length), check.size)
            out.append(OutMessage(_frame_topic(where, check, m, payload, row), payload, m.log_time, joined=True))
        return out
    frames, payloads = read_frames(
        reader, row.position, transition_from_msg(msg), check.codec, f"transition {row.index}"
    )
    return [
        OutMessage(camera_topic(row.robot_id, f.camera), p, row.wall_ns, joined=True)
        for f, p in zip(frames, payloads, strict=True)
    ]


def _frame_topic(where: str, check: _Check, span: MessageSpan, payload: bytes, row: TransitionRow) -> str:
    """The topic of the camera frame at `span`: its channel's, or (the channel record lost) its camera's."""
    topic = check.topics.get(span.channel_id)
    if topic is not None and topic not in (TRANSITION_TOPIC, EVENT_TOPIC):
        return topic
    try:
        return camera_topic(row.robot_id, frame_from_payload(payload, check.codec).camera)
    except DecodeError as exc:
        raise CorruptRecordError(where, span.offset, f"not a camera frame: {exc}") from exc


def _event(reader: SegmentReader, ep: EpisodeRow, kind: EpisodeKind, check: _Check) -> bytes:
    position = ep.start_event if kind == EpisodeKind.START else ep.end_event
    payload, msg = _read(reader, position, check, EVENT_TYPE)
    if msg is not None and (int(msg.kind) != kind or int(msg.episode_id) != ep.episode_id):
        raise CorruptRecordError(str(reader.path), position.offset, f"not the {kind.name} of episode {ep.episode}")
    return payload


def _read(reader: SegmentReader, position: Position, check: _Check, typename: str) -> tuple[bytes, Any]:
    """The payload at `position`, and the message it decodes to when no chunk CRC vouches for it (None when one
    does); `CorruptRecordError` when the CRC does not match or the payload does not decode."""
    payload = read_within(reader, position, check.size)
    verdict = check.crc.get(position.offset)
    if verdict is not None:
        if not verdict:
            raise CorruptRecordError(str(reader.path), position.offset, "its chunk's bytes do not match its CRC")
        return payload, None
    try:
        return payload, check.codec.decode(payload, typename)
    except DecodeError as exc:
        raise CorruptRecordError(str(reader.path), position.offset, str(exc)) from exc
