"""Typed errors of the replay buffer; each message says what is wrong and where."""

from __future__ import annotations

from pathlib import Path


class BufferError(RuntimeError):
    """Base class of every replay buffer error."""


class SegmentError(BufferError):
    """A segment (an MCAP file of a bag) cannot be written or read."""


class TruncatedSegmentError(SegmentError):
    """A segment ends in the middle of a record (a writer was killed while writing it)."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: truncated at byte {offset}: {reason}")
        self.path = path
        self.offset = offset


class CorruptRecordError(SegmentError):
    """The bytes at an indexed position are not the message the index says is there."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: bad record at byte {offset}: {reason}")
        self.path = path
        self.offset = offset


class SegmentWriteError(SegmentError):
    """Writing to a segment failed (disk full, I/O error): the segment was closed after its last whole episode."""


class RefusedError(BufferError):
    """Data the buffer does not store; nothing of it was written to a segment or the index."""


class InvalidTransitionError(RefusedError):
    """A transition (or an episode) whose values or ids cannot be stored: not finite, out of range, malformed."""


class DuplicateEpisodeError(RefusedError):
    """A robot's episode that the buffer already holds."""


class EpisodeNotStoredError(BufferError):
    """An episode could not be stored (the segment or the index failed while writing it); episodes stored
    before it are intact, and the next one is written to a new segment."""


class BufferIndexError(BufferError):
    """The SQLite index is missing, unreadable, or has rows that contradict each other."""


class MissingIndexError(BufferIndexError):
    """A buffer directory holds segments but no index (deleted, or lost with a disk): rebuild it."""


class IndexDamagedError(BufferIndexError):
    """The index file is not a database, or parts of it were overwritten: rebuild it from the segments."""


def reindex_hint(directory: Path) -> str:
    """How to rebuild the index of buffer `directory` (the end of every message about a lost or damaged index)."""
    return f"rebuild it from the segments with `user buffer reindex {directory}`"


class CorruptRowError(BufferIndexError):
    """An index row points outside its segment or disagrees with the message stored there."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"index row of transition {index}: {reason}")
        self.index = index


class BufferLockedError(BufferError):
    """Another process already has the buffer directory open for writing."""


class ReadOnlyBufferError(BufferError):
    """A write was attempted on a buffer opened read-only."""


class NotReadyError(BufferError):
    """Sampling was asked for before the buffer (or a sampler's subset) held enough transitions."""


class SampleTimeoutError(BufferError):
    """No batch could be produced before the deadline (rate limiter or prefetch queue)."""


class BagReadError(BufferError):
    """A foreign rosbag2 bag cannot be read."""


class MappingError(BufferError):
    """An import mapping (YAML) does not fit the bag it is applied to."""
