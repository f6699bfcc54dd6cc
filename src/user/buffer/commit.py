"""The commit protocol: a checked, whole episode goes to the open segment first and to the index second.

Its messages (START, the transitions with each frame once, on its camera's topic: `records`, END) are appended to
the open segment, flushed (and fsynced, by policy), and only then are its index rows committed in one transaction.
That commit is the point of no return; a crash before it drops the episode on restart, a crash after it keeps it. A
write or index error instead closes the segment cut back to its last committed episode (no record the index does not
know stays in it; recovery gives it a footer when the buffer is opened next), reports the episode as not stored,
and the next episode opens a new segment. Segments roll after N episodes or M MiB.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from user.buffer.config import StorageConfig
from user.buffer.disk.camera_topics import record
from user.buffer.disk.directory import segment_name, segment_path
from user.buffer.disk.metadata import fsync_dir, write_metadata
from user.buffer.disk.next_frames import shared
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import segment_metadata
from user.buffer.errors import BufferError, EpisodeNotStoredError
from user.buffer.index import Index
from user.buffer.records import index_rows, stored_messages
from user.buffer.storage import DiskStorage
from user.interfaces.codec import Codec
from user.interfaces.domain import Transition, transition_to_msg

_log = logging.getLogger("user.buffer.writer")

FaultHook = Callable[[str], None]  # called at named points of the commit protocol (crash tests)
MIB = 1024 * 1024
STORAGE_ERRORS = (OSError, BufferError, sqlite3.Error)  # what a full or failing disk raises on the way to a segment


class EpisodeCommitter:
    """Stores whole, checked episodes in the storage's segments and index, one open segment at a time."""

    def __init__(
        self, storage: DiskStorage, config: StorageConfig, *, clock: Callable[[], int], fault_hook: FaultHook | None
    ) -> None:
        self.storage = storage
        self.index: Index = storage.index
        self.codec: Codec = storage.codec
        self.config = config
        self._clock = clock
        self._hook = fault_hook or (lambda _point: None)
        self._segment: SegmentWriter | None = None
        self._segment_id = 0
        self._segment_name = ""
        self._segment_episodes = 0
        self._next_index, self._next_episode = self.index.next_numbers()
        self.episodes_committed = 0
        self.episodes_lost = 0  # episodes a write or index error kept out (EpisodeNotStoredError)

    def encode(self, transition: Transition, *, keep_next: bool = True) -> bytes:
        """The CDR bytes of a transition's record (frames in the next step's unless `keep_next`: `camera_topics`)."""
        return self.codec.encode(transition_to_msg(record(transition, keep_next=keep_next), self.codec))

    def _commit(self, ts: Sequence[Transition], payloads: Sequence[bytes], wall_ns: Sequence[int]) -> int:
        """Write a checked episode (its steps' record bytes without their next frames, and wall times) and index it;
        `EpisodeNotStoredError` (nothing of it kept) if either fails."""
        first, number = self._next_index, self._next_episode
        messages = stored_messages(self.codec, ts, payloads, wall_ns, self.encode)
        try:
            segment = self._open_segment()
        except STORAGE_ERRORS as exc:
            raise self._lost(ts, f"no segment could be opened ({exc})") from exc
        try:
            positions = segment.write_episode(messages)
        except Exception as exc:  # the segment closed itself after its last whole episode; it stays open in the
            segment.abandon()  # index, and opening the buffer again gives it its footer
            raise self._lost(ts, str(exc)) from exc
        self._hook("episode:written")
        episode, rows = index_rows(ts, wall_ns, positions, segment_id=self._segment_id, first=first, number=number)
        try:
            self.index.commit_episode(episode, rows, segment.bytes_written)
        except STORAGE_ERRORS as exc:
            segment.discard_last_episode()  # no record the index does not know may stay in the segment
            raise self._lost(ts, f"the index refused it ({exc}); its records were cut from the segment") from exc
        self._hook("episode:indexed")
        self.storage.add_committed(rows, shared(ts))
        self._next_index += len(rows)
        self._next_episode += 1
        self._segment_episodes += 1
        self.episodes_committed += 1
        if (
            self._segment_episodes >= self.config.segment_max_episodes
            or segment.bytes_written >= self.config.segment_max_mb * MIB
        ):
            self.roll()
        return number

    def _lost(self, ts: Sequence[Transition], reason: str) -> EpisodeNotStoredError:
        """Count and log an episode a write or index error kept out; the open segment is given up."""
        self._segment = None
        self.episodes_lost += 1
        text = (
            f"robot {ts[0].robot_id}'s episode {ts[0].episode_id} ({len(ts)} steps) was not stored: {reason}; "
            "the episodes stored before it are intact and the next one opens a new segment"
        )
        _log.error("%s", text)
        return EpisodeNotStoredError(text)

    # ---------------------------------------------------------------------------------------------- segments

    def _open_segment(self) -> SegmentWriter:
        if self._segment is not None:
            return self._segment
        existing = [s.name for s in self.index.segments()]
        number = 1 + max((int(n.rsplit("_", 1)[1]) for n in existing), default=-1)
        while segment_path(self.storage.directory, segment_name(number)).parent.exists():
            number += 1  # a directory the index does not know (left by hand or by an old crash): keep it
        name = segment_name(number)
        row = self.index.add_segment(name, self._clock())  # before the file exists: recovery knows about it
        path = segment_path(self.storage.directory, name)
        path.parent.mkdir(parents=True, exist_ok=False)
        fsync_dir(path.parent.parent)
        self._segment = SegmentWriter(
            path,
            self.codec,
            chunk_bytes=max(1024, int(self.config.chunk_mb * MIB)),
            fsync_episodes=self.config.fsync == "episode",
            fsync_close=self.config.fsync != "never",
        )
        self._segment_id, self._segment_name, self._segment_episodes = row.id, name, 0
        _log.info("opened segment %s", name)
        return self._segment

    def roll(self) -> None:
        """Close the open segment (footer, metadata.yaml, index), if any; the next episode opens a new one.

        If closing fails (a full disk), the error is logged, not raised: the segment stays open in the index with
        its committed episodes intact and readable, and recovery finishes it when the buffer is opened next."""
        segment = self._segment
        if segment is None:
            return
        self._segment = None
        try:
            self._close(segment)
        except STORAGE_ERRORS as exc:
            segment.abandon()
            _log.error(
                "segment %s could not be closed (%s); its %d episodes stay readable and it is finished when the "
                "buffer is opened next",
                self._segment_name,
                exc,
                self._segment_episodes,
            )
            return
        _log.info("closed segment %s (%d episodes)", self._segment_name, self._segment_episodes)

    def _close(self, segment: SegmentWriter) -> None:
        stats = segment.finish()
        self._hook("roll:finished")
        bag_dir: Path = segment.path.parent
        write_metadata(bag_dir, segment_metadata(segment.path.name, stats), fsync=self.config.fsync != "never")
        self._hook("roll:metadata")
        self.index.close_segment(self._segment_id, os.path.getsize(segment.path), self._clock())
        self._hook("roll:closed")
