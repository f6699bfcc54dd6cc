"""Storage: the segments on disk, the index beside them and the cache in front, behind `get(indices)`.

Like a torchrl storage, it holds the data and answers reads by transition number; samplers choose the
numbers, the writer appends committed episodes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from user.buffer.batch import BatchError
from user.buffer.cache import TransitionCache, cache_capacity
from user.buffer.columns import Columns, ColumnView
from user.buffer.config import StorageConfig
from user.buffer.disk.camera_topics import attach, frame_count, read_frames
from user.buffer.disk.directory import segment_path
from user.buffer.disk.next_frames import is_elided, restore, successor_problem
from user.buffer.disk.segment_schemas import segment_codec
from user.buffer.disk.segments import TRANSITION_TYPE, Position, SegmentReader
from user.buffer.errors import CorruptRecordError, IndexDamagedError, SegmentError, reindex_hint
from user.buffer.index import Index
from user.buffer.rows import TransitionRow
from user.interfaces.codec import Codec, DecodeError
from user.interfaces.domain import Transition, transition_from_msg

_log = logging.getLogger("user.buffer.storage")

MAX_OPEN_SEGMENTS = 64


class DiskStorage:
    """Transitions by number: from the cache when there, else one `pread` and a CDR decode."""

    def __init__(
        self,
        directory: Path,
        index: Index,
        codec: Codec,
        config: StorageConfig,
        read_as: Callable[[Transition], Transition] | None = None,
    ) -> None:
        self.directory = directory
        # how this buffer's reader takes each transition (a learner's task conditioning), applied once as it enters
        # the cache or is read from disk; the segments keep what the robot sent
        self.read_as = read_as
        self.index = index
        self.codec = codec
        self.config = config
        self.columns = Columns()
        self.cache = TransitionCache(cache_capacity(config.cache_size, config.cache_ratio, 0))
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._readers: OrderedDict[int, SegmentReader] = OrderedDict()
        self._segment_names: dict[int, str] = {}
        self._codecs: dict[int, Codec] = {}  # per segment: the codec of the definitions it was written with
        self.disk_reads = 0
        self.on_commit: Callable[[Sequence[Transition]], None] | None = None  # told of each committed episode
        self.refresh()

    def __len__(self) -> int:
        return len(self.columns)

    def view(self) -> ColumnView:
        return self.columns.view()

    def refresh(self) -> int:
        """Load rows committed since the last call (by this process or another); returns how many."""
        with self._refresh_lock:  # two threads refreshing at once would append the same rows twice
            rows = self.index.column_rows(len(self.columns))
            self._extend(rows)
        self._resize_cache()
        return len(rows)

    def _extend(self, rows: list[tuple[Any, ...]]) -> None:
        """Append rows read from the index file; values no row of this buffer can hold mean the file is damaged."""
        start = len(self.columns)
        try:
            self.columns.extend_tuples(rows)
        except (TypeError, ValueError, OverflowError) as exc:
            raise IndexDamagedError(
                f"{self.index.path}: transition rows from {start} on do not load ({exc}); "
                f"{reindex_hint(self.directory)}"
            ) from exc
        view = self.columns.view()
        if len(rows) and (view.offset[start:].min() < 0 or view.length[start:].min() < 0):
            raise IndexDamagedError(
                f"{self.index.path}: a transition row from {start} on points before its file starts; "
                f"{reindex_hint(self.directory)}"
            )

    def add_committed(self, rows: Sequence[TransitionRow], transitions: Sequence[Transition]) -> None:
        """A just-committed episode: its rows join the columns, its transitions enter the cache first."""
        self.columns.extend(rows)
        self._resize_cache()
        for row, transition in zip(rows, transitions, strict=True):
            self.cache.put(row.index, self.read_as(transition) if self.read_as is not None else transition)
        if self.on_commit is not None:
            self.on_commit(transitions)

    def _resize_cache(self) -> None:
        self.cache.set_capacity(cache_capacity(self.config.cache_size, self.config.cache_ratio, len(self.columns)))

    # ---------------------------------------------------------------------------------------------- reads

    def get(self, indices: Sequence[int]) -> list[Transition]:
        """Transitions `indices` (any order, repeats allowed); misses are read from disk in file order."""
        out = self.cache.get_many(indices)
        if all(t is not None for t in out):
            return out  # type: ignore[return-value]  # all hits: no misses to read
        view = self.columns.view()
        missing = sorted({int(indices[k]) for k, t in enumerate(out) if t is None}, key=view.position)
        loaded = {i: self._decode(i, view) for i in missing}
        for i, t in loaded.items():
            if is_elided(t):
                loaded[i] = self._restored(i, t, view, loaded.get(i + 1))
        if self.read_as is not None:  # after every restoration: a successor's frames are taken as stored
            loaded = {i: self.read_as(t) for i, t in loaded.items()}
        return [t if t is not None else loaded[int(indices[k])] for k, t in enumerate(out)]

    def actions(self, indices: np.ndarray) -> np.ndarray:
        """(N, A) float32 actions of transitions `indices` (action chunks): the cache's action column where it
        holds them, else the transition's record alone (its camera frames are not read); `BatchError` when their
        shapes differ."""
        indices = np.asarray(indices, dtype=np.int64)
        if not len(indices):
            raise BatchError("no transitions to read actions of")
        gathered, held = self.cache.actions(indices)
        if gathered is not None and held.all():
            return np.asarray(gathered, dtype=np.float32)
        view = self.columns.view()
        found = self.cache.get_many([int(i) for i in indices])
        out: list[np.ndarray] = []
        for k, index in enumerate(indices):
            if gathered is not None and held[k]:
                out.append(gathered[k])
                continue
            t = found[k]
            out.append(t.action.data if t is not None else self._decode_record(int(index), view).action.data)
        shapes = {np.shape(a) for a in out}
        if len(shapes) > 1:
            where = f"transitions {indices.min()}..{indices.max()}"
            raise BatchError(f"{where}: actions of shapes {sorted(shapes)} in one batch's chunks")
        return np.stack(out).astype(np.float32, copy=False)

    def read(self, index: int, view: ColumnView | None = None) -> Transition:
        """Transition `index` from disk (bypassing the cache, but for the next frames of an elided step)."""
        view = view or self.columns.view()
        t = self._decode(index, view)
        return self._restored(index, t, view, None) if is_elided(t) else t

    def _restored(self, index: int, t: Transition, view: ColumnView, successor: Transition | None) -> Transition:
        """Elided transition `index` with its next frames back from the next step's record (`next_frames`)."""
        if successor is None:
            successor = self.cache.get(index + 1)
        if successor is None and index + 1 < view.size:
            successor = self._decode(index + 1, view)
        problem = successor_problem(t, successor)
        if problem is not None or successor is None:
            segment_id, position = view.position(index)
            raise CorruptRecordError(str(self._path(segment_id)), position.offset, f"transition {index}: {problem}")
        return restore(t, successor)

    def _decode(self, index: int, view: ColumnView) -> Transition:
        """Transition `index` as its record holds it (an elided step's next frames still placeholders)."""
        t = self._decode_record(index, view)
        segment_id, position = view.position(index)
        return self.with_frames(t, segment_id, position)

    def _decode_record(self, index: int, view: ColumnView) -> Transition:
        """Transition `index`'s own record, its camera frames still placeholders (they follow it on their topics)."""
        if not 0 <= index < view.size:
            raise IndexError(f"transition {index} is not in the buffer (it holds {view.size})")
        segment_id, position = view.position(index)
        payload = self.read_payload(segment_id, position)
        try:
            msg = self.segment_codec(segment_id).decode(payload, TRANSITION_TYPE)
        except DecodeError as exc:
            path = str(self._path(segment_id))
            raise CorruptRecordError(path, position.offset, f"transition {index} does not decode: {exc}") from exc
        self.disk_reads += 1
        return transition_from_msg(msg)

    def with_frames(self, t: Transition, segment_id: int, position: Position) -> Transition:
        """`t`, read at `position` of segment `segment_id`, with the camera frames that follow its record taken
        back into its placeholders (`camera_topics`); `CorruptRecordError` if they are not its frames."""
        if not frame_count(t):
            return t
        with self._lock:
            reader = self._reader(segment_id)
            frames, _ = read_frames(
                reader, position, t, self.codec, f"{t.robot_id}'s episode {t.episode_id} step {t.step}"
            )
        return attach(t, frames)

    def segment_codec(self, segment_id: int) -> Codec:
        """The codec of the definitions segment `segment_id` was written with (`self.codec` for every segment
        written since its types last changed, and for one whose definitions cannot be trusted: its records are
        then checked one by one as before)."""
        codec = self._codecs.get(segment_id)
        if codec is None:
            codec = self._codecs[segment_id] = segment_codec(self._path(segment_id), self.codec, salvage=True)
        return codec

    def read_payload(self, segment_id: int, position: Position) -> bytes:
        """The CDR bytes at `position` of segment `segment_id`."""
        with self._lock:  # a reader is never closed while another thread reads through it
            return self._reader(segment_id).read(position)

    def _path(self, segment_id: int) -> Path:
        name = self._segment_names.get(segment_id)
        if name is None:
            self._segment_names = {s.id: s.name for s in self.index.segments()}
            name = self._segment_names.get(segment_id)
        if name is None:
            raise SegmentError(f"segment {segment_id} is not in the index")
        return segment_path(self.directory, name)

    def _reader(self, segment_id: int) -> SegmentReader:
        """The open reader of a segment (call with the lock held); keeps at most MAX_OPEN_SEGMENTS open."""
        reader = self._readers.get(segment_id)
        if reader is not None:
            self._readers.move_to_end(segment_id)
            return reader
        reader = SegmentReader(self._path(segment_id))
        self._readers[segment_id] = reader
        while len(self._readers) > MAX_OPEN_SEGMENTS:
            _, old = self._readers.popitem(last=False)
            old.close()
        return reader

    def close(self) -> None:
        with self._lock:
            for reader in self._readers.values():
                reader.close()
            self._readers.clear()
