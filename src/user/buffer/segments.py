"""Segments: each one a rosbag2 bag directory holding one MCAP file, as Humble's mcap plugin writes it.

A segment is written episode by episode with `mcap`'s Writer (profile "ros2", schemas "ros2msg" with the
full message definitions, messages "cdr"), one or more uncompressed chunks per episode, so every message
sits at a fixed file offset that the index records. A transition's camera frames (`user.buffer.camera_topics`)
are messages on a topic per camera written right after it, in the same chunk: a chunk ends only between
groups, so the frames of the transition at offset X start where its record ends. Closing a segment writes the
MCAP summary and footer and then the bag's metadata.yaml (version 5), after which `ros2 bag info` and
`ros2 bag play` accept it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcap.writer import CompressionType, IndexType, Writer

from user import __version__
from user.buffer.errors import CorruptRecordError, SegmentError, SegmentWriteError, TruncatedSegmentError
from user.buffer.mcapscan import MESSAGE_PREFIX, OP_MESSAGE, RECORD_PREFIX, ScanError, parse_message_record, scan
from user.buffer.metadata import BagMetadata, FileInfo, TopicInfo, qos_profile_yaml
from user.interfaces.codec import Codec

_log = logging.getLogger("user.buffer.segments")

TRANSITION_TOPIC = "/transitions"
EVENT_TOPIC = "/episode_events"
TRANSITION_TYPE = "user/msg/Transition"
EVENT_TYPE = "user/msg/EpisodeEvent"
TOPICS = ((TRANSITION_TOPIC, TRANSITION_TYPE), (EVENT_TOPIC, EVENT_TYPE))
FRAME_TYPE = "sensor_msgs/msg/CompressedImage"  # the type of every other topic: one per camera
CAMERA_TOPIC_SUFFIX = "/image/compressed"  # a camera topic's name ends so (`camera_topics.camera_topic`)
UNCHUNKED = 1 << 62  # the mcap Writer's chunk size: chunks are cut by `SegmentWriter` only, between groups
FRAME_READ_AHEAD = 32 * 1024  # bytes read after a transition's record for its camera frames at first
PROFILE = "ros2"
SCHEMA_ENCODING = "ros2msg"
MESSAGE_ENCODING = "cdr"
STORAGE_ID = "mcap"


def topic_type(topic: str) -> str:
    """The message type of `topic` in a segment; `SegmentError` for a topic the buffer does not write."""
    for name, typename in TOPICS:
        if name == topic:
            return typename
    if topic.startswith("/") and topic.endswith(CAMERA_TOPIC_SUFFIX):
        return FRAME_TYPE
    raise SegmentError(f"topic {topic!r} is not one a segment holds")


def segment_file_name(name: str) -> str:
    """The MCAP file inside bag directory `name` (rosbag2 names the first file of bag X "X_0.mcap")."""
    return f"{name}_0.mcap"


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


def _reason(exc: BaseException) -> str:
    """An error's reason, as an operator reads it (`No space left on device` rather than `[Errno 28] ...`)."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


class SegmentWriter:
    """Writes one segment's MCAP file, one episode (a list of messages) at a time.

    A write that fails (disk full, I/O error) closes the file cut back to the end of the last whole episode,
    so what was written before stays valid; the segment takes no further episodes after that."""

    def __init__(self, path: Path, codec: Codec, *, chunk_bytes: int, fsync_episodes: bool, fsync_close: bool) -> None:
        self.path = path
        self.stats = SegmentStats()
        self._codec = codec
        self._chunk_bytes = chunk_bytes
        self._chunk_fill = 0  # bytes of messages in the chunk being built
        self._fsync_episodes = fsync_episodes
        self._fsync_close = fsync_close
        try:
            self._stream = open(path, "xb")  # noqa: SIM115 - owned by this object, closed in finish/abandon
        except OSError as exc:
            raise SegmentError(f"{path}: cannot create segment file ({_reason(exc)})") from exc
        try:
            self._read_fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            self._stream.close()
            raise SegmentError(f"{path}: cannot open segment file to read back ({_reason(exc)})") from exc
        self._closed = False
        self._writer = Writer(
            self._stream,
            chunk_size=UNCHUNKED,  # cut by `write_episode`, never inside a transition's group
            compression=CompressionType.NONE,  # images are JPEG already; keeps messages at fixed offsets
            index_types=IndexType.ALL,
        )
        self._writer.start(profile=PROFILE, library=f"user-buffer/{__version__}")
        self._channels: dict[str, int] = {}
        self._schemas: dict[str, int] = {}
        for topic, _ in TOPICS:
            self._channel(topic)
        self._sequence = 0
        self._episode_start = self._stream.tell()  # file offset where the episode written last begins

    @property
    def bytes_written(self) -> int:
        return self._stream.tell()

    def _channel(self, topic: str) -> int:
        """The channel id of `topic`, registered (with its type's schema) on first use."""
        channel = self._channels.get(topic)
        if channel is None:
            typename = topic_type(topic)
            schema_id = self._schemas.get(typename)
            if schema_id is None:
                schema_id = self._schemas[typename] = self._writer.register_schema(
                    name=typename, encoding=SCHEMA_ENCODING, data=self._codec.definition(typename).encode("utf-8")
                )
            channel = self._channels[topic] = self._writer.register_channel(
                topic=topic,
                message_encoding=MESSAGE_ENCODING,
                schema_id=schema_id,
                metadata={"offered_qos_profiles": qos_profile_yaml()},
            )
        return channel

    def write_episode(self, messages: Sequence[OutMessage]) -> list[Position]:
        """Append `messages` as whole chunks, flush them to the OS (and disk, if fsync); return the positions of
        the messages that are not `joined` (each joined one lies right after the one before it)."""
        if self._closed:
            raise SegmentError(f"{self.path}: segment already closed")
        if messages and messages[0].joined:
            raise SegmentError(f"{self.path}: an episode's first message cannot be joined to one before it")
        start = self._episode_start = self._stream.tell()
        try:
            for topic in {msg.topic for msg in messages} - self._channels.keys():
                self._channel(topic)  # before any message: a channel record inside a group would split it
            for msg in messages:
                if not msg.joined and self._chunk_fill >= self._chunk_bytes:
                    self._writer.flush()  # type: ignore[no-untyped-call]
                    self._chunk_fill = 0
                self._chunk_fill += MESSAGE_PREFIX + len(msg.data)
                self._sequence += 1
                self._writer.add_message(
                    channel_id=self._channels[msg.topic],
                    log_time=msg.log_time_ns,
                    data=msg.data,
                    publish_time=msg.log_time_ns,
                    sequence=self._sequence & 0xFFFFFFFF,
                )
            self._writer.flush()  # type: ignore[no-untyped-call]
            self._chunk_fill = 0
            if self._fsync_episodes:
                os.fsync(self._stream.fileno())
            positions = self._positions(start, self._stream.tell(), messages)
        except Exception as exc:  # whatever failed, no byte of this episode may stay in the file
            self._close_at(start)
            what = (
                str(exc) if isinstance(exc, SegmentError) else f"{self.path}: cannot write an episode ({_reason(exc)})"
            )
            raise SegmentWriteError(
                f"{what}; the segment was closed at byte {start}, after its last whole episode"
            ) from exc
        for msg in messages:
            self.stats.add(msg.topic, msg.log_time_ns)
        return positions

    def _positions(self, start: int, end: int, messages: Sequence[OutMessage]) -> list[Position]:
        """Read back the bytes just written and find each message record in them."""
        data = os.pread(self._read_fd, end - start, start)
        try:
            found = scan(data, base=start).messages
        except ScanError as exc:
            raise SegmentError(f"{self.path}: cannot read back the episode just written: {exc}") from exc
        if len(found) != len(messages):
            raise SegmentError(f"{self.path}: wrote {len(messages)} messages, found {len(found)} on reading back")
        for span, msg in zip(found, messages, strict=True):
            if span.channel_id != self._channels[msg.topic] or span.length != len(msg.data):
                raise SegmentError(f"{self.path}: message at byte {span.offset} is not the one written there")
        for before, span, msg in zip(found, found[1:], messages[1:], strict=False):
            if msg.joined and span.offset != before.offset + MESSAGE_PREFIX + before.length:
                raise SegmentError(f"{self.path}: message at byte {span.offset} does not follow the one before it")
        return [Position(span.offset, span.length) for span, msg in zip(found, messages, strict=True) if not msg.joined]

    def finish(self) -> SegmentStats:
        """Write the MCAP summary and footer, make the file durable, close it. If that fails, the file is closed
        without a footer, cut back to its last whole episode (`SegmentWriteError`)."""
        if self._closed:
            return self.stats
        end = self._stream.tell()
        try:
            self._writer.finish()  # type: ignore[no-untyped-call]
            self._stream.flush()
            if self._fsync_close:
                os.fsync(self._stream.fileno())
        except Exception as exc:
            self._close_at(end)
            raise SegmentWriteError(f"{self.path}: cannot write the footer ({_reason(exc)})") from exc
        self._close_files()
        return self.stats

    def abandon(self) -> None:
        """Close the file without a footer (what a crash leaves); never raises."""
        if not self._closed:
            try:
                self._stream.flush()
            except OSError as exc:
                _log.warning("%s: flush on abandon failed: %s", self.path, exc)
            self._close_files()

    def discard_last_episode(self) -> None:
        """Close the file without a footer, cut back to where the episode written last begins (its index rows
        could not be committed: no record the index does not know may stay); never raises."""
        self._close_at(self._episode_start)

    def _close_at(self, size: int) -> None:
        """Close the file without a footer and drop every byte from `size` on; never raises."""
        if self._closed:
            return
        self._close_files()
        try:
            os.truncate(self.path, size)
        except OSError as exc:  # recovery drops the unindexed rest when the buffer is opened next
            _log.warning("%s: cannot cut back to byte %d: %s", self.path, size, _reason(exc))

    def _close_files(self) -> None:
        """Close both descriptors, whatever the stream still holds (a failed flush is reported, not raised)."""
        self._closed = True
        try:
            self._stream.close()
        except OSError as exc:
            _log.warning("%s: closing failed: %s", self.path, exc)
        os.close(self._read_fd)


class SegmentReader:
    """Reads single messages of one segment file by position (`pread`, safe from several threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise SegmentError(f"{path}: cannot open segment file ({_reason(exc)})") from exc

    def read(self, position: Position) -> bytes:
        """The CDR payload at `position`; `TruncatedSegmentError` or `CorruptRecordError` if it is not there."""
        want = MESSAGE_PREFIX + position.length
        try:
            record = os.pread(self._fd, want, position.offset)
        except OSError as exc:
            raise SegmentError(f"{self.path}: cannot read byte {position.offset} ({_reason(exc)})") from exc
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
            raise SegmentError(f"{self.path}: cannot read byte {offset} ({_reason(exc)})") from exc

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
