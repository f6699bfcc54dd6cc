"""The replay buffer: one directory of rosbag2 segments + SQLite index, a cache in front, samplers on top.

    with ReplayBuffer.open("data/buffer", config) as buf:    # writer: recovers after a crash
        buf.add(transition)                                  # stored when its episode ends
        batch = buf.sample(timeout_s=5.0)                    # rate-limited, prefetched TransitionBatch

`ReplayBuffer.open(..., read_only=True)` works beside a running writer (reward-model training, evaluation,
`user buffer info`), and `refresh()` picks up episodes committed since.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from user.buffer.batch import TransitionBatch, collate
from user.buffer.chunks import chunk_rows, with_chunks
from user.buffer.commit import FaultHook
from user.buffer.config import BufferConfig
from user.buffer.disk.directory import lock_directory
from user.buffer.errors import ReadOnlyBufferError, SampleTimeoutError
from user.buffer.frames.frame_stage import FrameStage, PendingPixels
from user.buffer.frames.prefetch import Prefetcher
from user.buffer.index import Index
from user.buffer.info import BufferInfo, buffer_info
from user.buffer.rate_limiter import RateLimiter
from user.buffer.repair.recovery import RecoveryReport, recover
from user.buffer.repair.verify import VerifyReport, verify
from user.buffer.rows import TransitionQuery
from user.buffer.samplers import Sampler, make_sampler
from user.buffer.storage import DiskStorage
from user.buffer.writer import EpisodeWriter
from user.interfaces.codec import Codec, default_codec
from user.interfaces.domain import Transition

_log = logging.getLogger("user.buffer")

READ_ONLY_POLL_S = 0.2  # how often a read-only buffer looks for new episodes while waiting to sample


class ReplayBuffer:
    """Facade over storage (segments, index, cache), writer, sampler, rate limiter and prefetch."""

    def __init__(
        self,
        storage: DiskStorage,
        config: BufferConfig,
        writer: EpisodeWriter | None,
        lock_fd: int | None,
        recovery: RecoveryReport | None,
    ) -> None:
        self.storage = storage
        self.config = config
        self.writer = writer
        self.recovery = recovery
        self.sampler: Sampler = make_sampler(config.sampler)
        self.rate_limiter = RateLimiter.from_config(config.rate_limiter)
        self.rate_limiter.insert(len(storage))  # what is already stored counts as inserted
        self._lock_fd = lock_fd
        self._prefetcher: Prefetcher[TransitionBatch] | None = None
        self._closed = False
        self.frames = FrameStage(config.frames) if config.decode_images else None  # pixels of batches
        if self.frames is not None:
            storage.on_commit = self._committed
        self._pending: PendingPixels | None = None  # the prefetch worker's batch whose frames are decoding
        self.wait_s = 0.0  # time `sample` waited for a batch the rate limiter allowed (the feed, not the data)
        self.sample_calls = 0

    def _committed(self, transitions: Sequence[Transition]) -> None:
        """An episode was stored: its frames are decoded ahead for the frame cache."""
        if self.frames is not None:
            self.frames.follow(self.storage.cache.capacity)
            self.frames.prime(transitions)

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: BufferConfig | None = None,
        *,
        read_only: bool = False,
        codec: Codec | None = None,
        fault_hook: FaultHook | None = None,
        read_as: Callable[[Transition], Transition] | None = None,
    ) -> ReplayBuffer:
        """Open (creating it if needed, unless read-only) the buffer in `directory`.

        Opening for writing takes an exclusive lock and first recovers from any crash of an earlier writer, and
        from segment files found damaged (see `user.buffer.repair.recovery`: readable episodes kept, originals in
        quarantine/). Segments without an index are a `MissingIndexError` and a damaged index an
        `IndexDamagedError` (both say to run `user buffer reindex DIR`), never an empty buffer. `read_as`: how
        every transition is taken as it is read or cached (a learner's task conditioning); the disk keeps them as
        they were added.
        """
        path = Path(directory)
        config = config or BufferConfig()
        codec = codec or default_codec()
        if read_only:
            reader_index = Index(path, read_only=True)
            return cls(DiskStorage(path, reader_index, codec, config.storage, read_as), config, None, None, None)
        path.mkdir(parents=True, exist_ok=True)
        lock_fd = lock_directory(path)
        index: Index | None = None
        try:
            started = time.monotonic()
            index = Index(path, durable=config.storage.fsync == "episode")
            report = recover(path, index, codec, config.storage, fault_hook=fault_hook)
            storage = DiskStorage(path, index, codec, config.storage, read_as)
            writer = EpisodeWriter(storage, config.storage, fault_hook=fault_hook)
            _log.info("opened %s: %d transitions in %.3f s", path, len(storage), time.monotonic() - started)
        except BaseException:
            if index is not None:
                index.close()
            os.close(lock_fd)
            raise
        return cls(storage, config, writer, lock_fd, report)

    # ---------------------------------------------------------------------------------------------- writing

    def _writer(self) -> EpisodeWriter:
        if self.writer is None:
            raise ReadOnlyBufferError(f"{self.storage.directory} is open read-only")
        return self.writer

    def add(self, transition: Transition, wall_ns: int | None = None, payload: bytes | None = None) -> int | None:
        """Add one transition; when it ends its episode, the whole episode is stored and its number returned.
        `payload`: its CDR bytes as received, stored as they are (see `EpisodeWriter.add`); else encoded here."""
        before = len(self.storage)
        episode = self._writer().add(transition, wall_ns, payload)
        if episode is not None:
            self.rate_limiter.insert(len(self.storage) - before)
        return episode

    def add_episode(
        self,
        transitions: list[Transition],
        wall_ns: int | None = None,
        payloads: Sequence[bytes | None] | None = None,
    ) -> int:
        """Store a whole episode at once (a robot's re-sent episode); returns its buffer episode number.
        `payloads`: the transitions' CDR bytes as received, where known (see `EpisodeWriter.add_episode`)."""
        episode = self._writer().add_episode(transitions, wall_ns, payloads)
        self.rate_limiter.insert(len(transitions))
        return episode

    def has_episode(self, robot_id: str, episode_id: int) -> bool:
        """Whether `robot_id`'s episode `episode_id` is stored."""
        return self.storage.index.stored_episode(robot_id, episode_id) is not None

    def steps_in_progress(self) -> dict[str, int]:
        """Steps received of each robot's unfinished episode, stored once it ends (none in a read-only buffer)."""
        return self.writer.pending_steps() if self.writer is not None else {}

    def end_episode(self, robot_id: str, episode_id: int, steps: int) -> int | None:
        """The robot ended `episode_id` after `steps` steps without a done flag (operator reset): stored, its last
        step truncated, once all its steps are here (see `EpisodeWriter.end_episode`); returns its number then."""
        before = len(self.storage)
        episode = self._writer().end_episode(robot_id, episode_id, steps)
        if episode is not None:
            self.rate_limiter.insert(len(self.storage) - before)
        return episode

    # ---------------------------------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self.storage)

    def refresh(self) -> int:
        """Read-only buffers: take in episodes committed by the writer since; returns the new transitions."""
        added = self.storage.refresh()
        if added:
            self.rate_limiter.insert(added)
        return added

    def get(self, indices: list[int] | np.ndarray) -> list[Transition]:
        """Transitions by number (cache first, then disk)."""
        return self.storage.get([int(i) for i in indices])

    def query(self, query: TransitionQuery, limit: int | None = None) -> list[int]:
        """Transition numbers matching metadata filters (an indexed SQL query)."""
        return self.storage.index.query(query, limit)

    def set_policy_version(self, version: int) -> None:
        """The learner's current policy version (staleness-aware sampling)."""
        self.sampler.set_policy_version(version)

    def sample(self, batch_size: int | None = None, timeout_s: float = 30.0) -> TransitionBatch:
        """A batch, as soon as the rate limiter allows it; `SampleTimeoutError` at the deadline."""
        size = batch_size or self.config.batch_size
        self.sample_calls += 1
        if self.config.prefetch > 0 and size == self.config.batch_size:
            if self._prefetcher is None:
                self._prefetcher = Prefetcher(self._prefetch, self.config.prefetch)
            # a batch drawn and queued, or data there and allowed: any wait is for the batch to be made
            allowed, started = self._prefetcher.ready() > 0 or self.rate_limiter.can_sample(size), time.monotonic()
            batch = self._prefetcher.get(timeout_s)
            if allowed:
                self.wait_s += time.monotonic() - started
            return batch
        allowed, started = self.rate_limiter.can_sample(size), time.monotonic()
        made = self._produce(timeout_s, size)
        if allowed and made is not None:  # made in this thread, data there: reading and decoding it was the wait
            self.wait_s += time.monotonic() - started
        if made is None:
            raise SampleTimeoutError(f"no batch of {size} allowed within {timeout_s:.3g} s ({self._why_waiting(size)})")
        return made

    def _why_waiting(self, size: int) -> str:
        counts = self.rate_limiter.counts()
        if counts.inserted < counts.min_size:
            return f"{counts.inserted} of the {counts.min_size} transitions needed before sampling"
        if self.sampler.candidates(self.storage.view()) == 0:
            return f"the {self.sampler.kind} sampler has nothing to draw from"
        return f"rate limit: {counts.sampled} sampled for {counts.inserted} inserted"

    def _prefetch(self, timeout_s: float) -> TransitionBatch | None:
        """The prefetch worker's next batch. With pixels, a software pipeline one batch deep: the frames of the
        batch drawn last decode on the decoder's threads while this thread reads the next one; the last is
        returned once the next is started, or at once when no next batch is allowed now."""
        size = self.config.batch_size
        if self.frames is None:
            return self._draw(timeout_s, size)
        pending, self._pending = self._pending, None
        try:
            drawn = self._draw(0.0 if pending is not None else timeout_s, size)
        except Exception:
            self._pending = pending  # finished on the next call, after this error takes its turn
            raise
        if drawn is not None:
            self.frames.follow(self.storage.cache.capacity)
            self._pending = self.frames.start(drawn)
        return self.frames.finish(pending) if pending is not None else None

    def _produce(self, timeout_s: float, batch_size: int) -> TransitionBatch | None:
        """One batch, pixels too, in this thread; None at the deadline."""
        batch = self._draw(timeout_s, batch_size)
        if batch is None or self.frames is None:
            return batch
        self.frames.follow(self.storage.cache.capacity)
        return self.frames.pixels(batch)

    def _draw(self, timeout_s: float, size: int) -> TransitionBatch | None:
        """One batch (images as stored) once the sampler has data and the rate limiter allows it; None at the
        deadline."""
        deadline = time.monotonic() + timeout_s
        while not self._closed:
            remaining = max(0.0, deadline - time.monotonic())
            if self.writer is None:  # nobody in this process inserts: look for the writer's new episodes
                self.refresh()
                remaining = min(remaining, READ_ONLY_POLL_S)
            if self.sampler.candidates(self.storage.view()) > 0:
                if self.rate_limiter.acquire(size, remaining):
                    indices = self.sampler.sample(self.storage.view(), size)
                    return self._rows(indices)
            elif remaining > 0:
                self.rate_limiter.wait_for_insert(remaining)
            if time.monotonic() >= deadline:
                return None
        return None

    def _rows(self, indices: np.ndarray) -> TransitionBatch:
        """The batch of `indices`, images as stored: cached rows gathered by column, the rest read and collated;
        with each row's action chunk when `chunk_horizon` asks for it."""
        batch = self._transitions(indices)
        if self.config.chunk_horizon == 0:
            return batch
        view = self.storage.view()
        chunks = chunk_rows(view, indices, self.config.chunk_horizon)
        return with_chunks(batch, view, self.storage.actions(np.unique(chunks.rows)), chunks)

    def _transitions(self, indices: np.ndarray) -> TransitionBatch:
        batch, held = self.storage.cache.take(indices)
        if batch is None:
            return collate(self.storage.get(indices.tolist()), indices, decode_images=False)
        if held.all():
            return batch
        rows = np.flatnonzero(~held)
        missing = indices[rows]
        return batch.fill(rows, collate(self.storage.get(missing.tolist()), missing, decode_images=False))

    # ---------------------------------------------------------------------------------------------- reports

    def info(self) -> BufferInfo:
        return buffer_info(self.storage.index, self.storage.directory)

    def verify(self, *, decode: bool = True) -> VerifyReport:
        return verify(self.storage.directory, self.storage.index, self.storage.codec, decode=decode)

    def state_dict(self) -> dict[str, Any]:
        """What `resume` needs to continue sampling exactly: the sampler's state and the limiter's counts (the
        data itself stays on disk, and its index says what is stored)."""
        return {"sampler": self.sampler.state_dict(), "rate_limiter": self.rate_limiter.state_dict()}

    def resume(self, state: dict[str, Any]) -> None:
        """Continue sampling from `state`, saved by an earlier run of a learner: the sampler exactly as it was,
        the limiter's sample count, and every transition stored now counted as inserted (episodes committed
        after the save count too). The limiter keeps this run's settings, which may have changed. The data on
        disk is the truth about what is stored (a checkpoint of an older release also holds the storage's and
        writer's positions then: they are not read)."""
        self.sampler.load_state_dict(state["sampler"])
        self.rate_limiter.load_state_dict({"inserts": len(self), "samples": state["rate_limiter"]["samples"]})

    # ---------------------------------------------------------------------------------------------- life

    def close(self) -> None:
        """Stop prefetching, drop unfinished episodes, close the open segment (footer + metadata.yaml)."""
        if self._closed:
            return
        self._closed = True
        self.rate_limiter.close()
        if self._prefetcher is not None:
            self._prefetcher.close()
        if self.frames is not None:
            self.frames.close()
        try:
            if self.writer is not None:
                self.writer.close()
        finally:
            self.storage.close()
            self.storage.index.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> ReplayBuffer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
