"""Writing a segment: its MCAP file episode by episode, with `mcap`'s Writer, each message at a fixed offset.

Every episode is one or more uncompressed chunks, cut only between a transition and the next (never inside the group
of a transition and its camera frames), and read back at once to learn where each message record lies. A write that
fails cuts the file back to its last whole episode; `finish` writes the summary and footer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from mcap.writer import CompressionType, IndexType, Writer

from user import __version__
from user.buffer.disk.mcapscan import MESSAGE_PREFIX, ScanError, scan
from user.buffer.disk.metadata import qos_profile_yaml
from user.buffer.disk.segments import TOPICS, OutMessage, Position, SegmentStats, reason, topic_type
from user.buffer.errors import SegmentError, SegmentWriteError
from user.interfaces.codec import Codec

_log = logging.getLogger("user.buffer.segments")

UNCHUNKED = 1 << 62  # the mcap Writer's chunk size: chunks are cut by `SegmentWriter` only, between groups
PROFILE = "ros2"
SCHEMA_ENCODING = "ros2msg"
MESSAGE_ENCODING = "cdr"


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
            raise SegmentError(f"{path}: cannot create segment file ({reason(exc)})") from exc
        try:
            self._read_fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            self._stream.close()
            raise SegmentError(f"{path}: cannot open segment file to read back ({reason(exc)})") from exc
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
                str(exc) if isinstance(exc, SegmentError) else f"{self.path}: cannot write an episode ({reason(exc)})"
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
            raise SegmentWriteError(f"{self.path}: cannot write the footer ({reason(exc)})") from exc
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
            _log.warning("%s: cannot cut back to byte %d: %s", self.path, size, reason(exc))

    def _close_files(self) -> None:
        """Close both descriptors, whatever the stream still holds (a failed flush is reported, not raised)."""
        self._closed = True
        try:
            self._stream.close()
        except OSError as exc:
            _log.warning("%s: closing failed: %s", self.path, exc)
        os.close(self._read_fd)
