"""Segments: each one a rosbag2 bag directory holding one MCAP file, as Humble's mcap plugin writes it.

A segment is written episode by episode (`user.buffer.disk.segment_writer`, with `mcap`'s Writer: profile "ros2",
schemas "ros2msg" with the full message definitions, messages "cdr"), one or more uncompressed chunks per episode,
so every message sits at a fixed file offset that the index records and `SegmentReader` reads with one `pread`. A
transition's camera frames (`user.buffer.disk.camera_topics`) are messages on a topic per camera written right
after it, in the same chunk: a chunk ends only between groups, so the frames of the transition at offset X start
where its record ends. Closing a segment writes the MCAP summary and footer and then the bag's metadata.yaml
(version 5), after which `ros2 bag info` and `ros2 bag play` accept it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.disk.mcapscan import MESSAGE_PREFIX, OP_MESSAGE, RECORD_PREFIX, ScanError, parse_message_record
from user.buffer.disk.metadata import BagMetadata, FileInfo, TopicInfo, qos_profile_yaml
from user.buffer.errors import CorruptRecordError, SegmentError, TruncatedSegmentError

TRANSITION_TOPIC = "/transitions"
EVENT_TOPIC = "/episode_events"
TRANSITION_TYPE = "user/msg/Transition"
EVENT_TYPE = "user/msg/EpisodeEvent"
TOPICS = ((TRANSITION_TOPIC, TRANSITION_TYPE), (EVENT_TOPIC, EVENT_TYPE))
FRAME_TYPE = "sensor_msgs/msg/CompressedImage"  # the type of every other topic: one per camera
CAMERA_TOPIC_SUFFIX = "/image/compressed"  # a camera topic's name ends so (`camera_topics.camera_topic`)
FRAME_READ_AHEAD = 32 * 1024  # bytes read after a transition's record for its camera frames at first
STORAGE_ID = "mcap"
# The channel ids the buffer's writer gives its topics (it registers TOPICS in order): used where the channel
# records themselves sit in a damaged chunk.
WRITER_CHANNELS = {k + 1: topic for k, (topic, _) in enumerate(TOPICS)}


def topic_type(topic: str) -> str:
    """The message type of `topic` in a segment; `SegmentError` for a topic the buffer does not write."""
    for name, typename in TOPICS:
        if name == topic:
            return typename
    if topic.startswith("/") and topic.endswith(CAMERA_TOPIC_SUFFIX):
        return FRAME_TYPE
    raise SegmentError(f"topic {topic!r} is not one a segment holds")


@dataclass(frozen=True)
class OutMessage:
    """One message to write: its topic (one of TOPICS or a camera topic), CDR bytes and log time."""

    topic: str
    data: bytes
    log_time_ns: int
    joined: bool = False  # written right after the message before it, in its chunk (a transition's frames)


@dataclass(frozen=True, order=True)
class Position:
    """Where a message lies in its segment file."""

    offset: int  # file offset of the MCAP message record
    length: int  # bytes of the CDR payload


@dataclass
class SegmentStats:
    """What a segment holds, for its metadata.yaml."""

    counts: dict[str, int] = field(default_factory=lambda: {topic: 0 for topic, _ in TOPICS})
    start_ns: int | None = None
    end_ns: int | None = None

    def add(self, topic: str, log_time_ns: int) -> None:
        self.counts[topic] = self.counts.get(topic, 0) + 1
        self.start_ns = log_time_ns if self.start_ns is None else min(self.start_ns, log_time_ns)
        self.end_ns = log_time_ns if self.end_ns is None else max(self.end_ns, log_time_ns)

    @property
    def message_count(self) -> int:
        return sum(self.counts.values())


def segment_metadata(file_name: str, stats: SegmentStats) -> BagMetadata:
    """metadata.yaml content of a finished segment."""
    start = stats.start_ns or 0
    duration = (stats.end_ns or start) - start
    qos = qos_profile_yaml()
    cameras = sorted(topic for topic in stats.counts if topic not in dict(TOPICS))
    return BagMetadata(
        storage_identifier=STORAGE_ID,
        relative_file_paths=(file_name,),
        topics=tuple(
            TopicInfo(name=topic, type=topic_type(topic), offered_qos_profiles=qos, message_count=stats.counts[topic])
            for topic in [*(topic for topic, _ in TOPICS), *cameras]
        ),
        starting_time_ns=start,
        duration_ns=duration,
        message_count=stats.message_count,
        files=(FileInfo(file_name, start, duration, stats.message_count),),
    )


def reason(exc: BaseException) -> str:
    """An error's reason, as an operator reads it (`No space left on device` rather than `[Errno 28] ...`)."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


class SegmentReader:
    """Reads single messages of one segment file by position (`pread`, safe from several threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise SegmentError(f"{path}: cannot open segment file ({reason(exc)})") from exc

    def read(self, position: Position) -> bytes:
        """The CDR payload at `position`; `TruncatedSegmentError` or `CorruptRecordError` if it is not there."""
        want = MESSAGE_PREFIX + position.length
        try:
            record = os.pread(self._fd, want, position.offset)
        except OSError as exc:
            raise SegmentError(f"{self.path}: cannot read byte {position.offset} ({reason(exc)})") from exc
        if len(record) < want:
            raise TruncatedSegmentError(
                str(self.path), position.offset, f"message needs {want} bytes, only {len(record)} present"
            )
        try:
            _, payload = parse_message_record(record, position.offset)
        except ScanError as exc:
            raise CorruptRecordError(str(self.path), position.offset, str(exc)) from exc
        return payload

    def read_following(self, position: Position, count: int) -> list[bytes]:
        """The payloads of the `count` message records right after the one at `position` (a transition's camera
        frames); `TruncatedSegmentError` or `CorruptRecordError` if they are not there."""
        offset = position.offset + MESSAGE_PREFIX + position.length
        out: list[bytes] = []
        data, base = self._pread(offset, FRAME_READ_AHEAD), offset  # bytes read from file offset `base` on
        while len(out) < count:
            what = f"camera frame {len(out) + 1} of {count} after the record at byte {position.offset}"
            if base + len(data) - offset < RECORD_PREFIX:
                data, base = self._pread(offset, FRAME_READ_AHEAD), offset
                if len(data) < RECORD_PREFIX:
                    raise TruncatedSegmentError(str(self.path), offset, f"the file ends before {what}")
            at = offset - base
            opcode, size = data[at], RECORD_PREFIX + int.from_bytes(data[at + 1 : at + RECORD_PREFIX], "little")
            if opcode != OP_MESSAGE or size < MESSAGE_PREFIX:
                raise CorruptRecordError(str(self.path), offset, f"{what} is not there (opcode {opcode:#x}, {size} B)")
            if base + len(data) - offset < size:
                present = os.fstat(self._fd).st_size - offset  # (the descriptor was just read through)
                if present < size:  # a damaged length must not become a huge read
                    raise TruncatedSegmentError(str(self.path), offset, f"{what} needs {size} B, {present} present")
                data, base, at = self._pread(offset, size), offset, 0
            out.append(data[at + MESSAGE_PREFIX : at + size])
            offset += size
        return out

    def _pread(self, offset: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, offset)
        except OSError as exc:
            raise SegmentError(f"{self.path}: cannot read byte {offset} ({reason(exc)})") from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_within(reader: SegmentReader, position: Position, size: int) -> bytes:
    """`reader.read(position)` of a file of `size` bytes, refusing (as a cut file) a position that runs past its end
    before reading anything: a damaged row's length must not become a huge read."""
    if position.offset + MESSAGE_PREFIX + position.length > size:
        raise TruncatedSegmentError(
            str(reader.path), position.offset, f"a message of {position.length} bytes there runs past the end ({size})"
        )
    return reader.read(position)
