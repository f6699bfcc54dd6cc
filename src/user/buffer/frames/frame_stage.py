"""Pixel batches from batches of compressed frames: decoded frames from the frame cache, the rest decoded once
each (a frame shared by an observation and the previous step's next observation, or drawn twice, decodes
once) on the decoder's threads. Committed episodes' frames are decoded ahead, on a background thread.

Runs on the prefetch worker, so the learner's thread never decodes; `ReplayBuffer` composes it with the
storage and the sampler (the buffer itself neither decodes nor prefetches).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from user.buffer.batch import BatchError, TransitionBatch
from user.buffer.config import FramesConfig
from user.buffer.errors import BufferError
from user.buffer.frames.frame_cache import MIB, FrameCache
from user.buffer.frames.frame_decode import Decoding, FrameDecoder, make_decoder
from user.interfaces.domain import Transition
from user.interfaces.images import ImageCodecError

_log = logging.getLogger("user.buffer.frames")

MAX_PENDING_EPISODES = 32  # committed episodes waiting to be decoded ahead; later ones decode when drawn
EPISODE_SLACK = 16  # frame capacity per camera: one per cached transition plus one per this many (episode ends)


@dataclass
class _CameraPixels:
    """One camera's part of a pixel batch being made."""

    camera: str
    out: np.ndarray  # (2B, H, W, 3): the observations' rows, then the next observations'
    decoded: dict[bytes, int] = field(default_factory=dict)  # each distinct missing frame -> the row it decodes into
    repeats: list[tuple[int, int]] = field(default_factory=list)  # (row, row decoding the same frame)
    decoding: Decoding = field(default_factory=Decoding)


@dataclass
class PendingPixels:
    """A pixel batch begun by `FrameStage.start`: the batch as drawn and each camera's part."""

    batch: TransitionBatch
    cameras: list[_CameraPixels] = field(default_factory=list)
    error: BatchError | None = None  # what went wrong while starting, raised by `finish`


def _yield_cpu() -> None:
    """Run this thread at the lowest CPU priority (Linux: niceness is per thread): decoding ahead uses idle
    cores and never slows the threads that store data or train."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux: it runs at normal priority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def frame_capacity(transitions: int) -> int:
    """Frames per camera the cache may hold for `transitions` cached transitions: one observation each, and
    the final next observation of the episodes among them."""
    return transitions + math.ceil(transitions / EPISODE_SLACK)


class FrameStage:
    """Turns a batch's compressed frames into (B, H, W, 3) uint8 pixels; decodes committed frames ahead."""

    def __init__(self, config: FramesConfig, decoder: FrameDecoder | None = None) -> None:
        self._config = config
        self._decoder_lock = threading.Lock()
        self._decoder = decoder or (make_decoder(config) if config.device == "cuda" else None)  # cuda: fail early
        self.cache = FrameCache(0, int(config.cache_mb * MIB))
        self.primed_skipped = 0  # committed episodes not decoded ahead (the backlog was full)
        self._ahead = (
            ThreadPoolExecutor(1, thread_name_prefix="buffer-prime", initializer=_yield_cpu) if config.prime else None
        )
        self._pending = 0
        self._pending_lock = threading.Condition()
        self._logged: set[str] = set()
        self._closed = False

    @property
    def decoder(self) -> FrameDecoder:
        """Made at the first frame to decode: choosing the device imports torch (seconds), which a buffer that
        never decodes a frame (state only, `user buffer info`) need not pay."""
        if self._decoder is None:
            with self._decoder_lock:
                if self._decoder is None:
                    if self._closed:  # none made before close: none may outlive it (its threads)
                        raise BufferError("the buffer's frame stage is closed")
                    self._decoder = make_decoder(self._config)
        return self._decoder

    @decoder.setter
    def decoder(self, decoder: FrameDecoder) -> None:
        with self._decoder_lock:
            self._decoder = decoder

    def follow(self, transitions: int) -> None:
        """The transition cache holds `transitions`: hold the frames of that many."""
        capacity = frame_capacity(transitions)
        if capacity != self.cache.capacity:
            self.cache.set_capacity(capacity)

    # ---------------------------------------------------------------------------------------------- batches

    def pixels(self, batch: TransitionBatch) -> TransitionBatch:
        """`batch` (images as compressed bytes) with every camera's images and next images as pixels."""
        return self.finish(self.start(batch))

    def start(self, batch: TransitionBatch) -> PendingPixels:
        """Begin `pixels(batch)`: held frames copied, missing ones decoding on the decoder's threads while the
        caller reads the next batch; `finish` completes it. Errors are raised by `finish`."""
        pending = PendingPixels(batch)
        try:
            for cam in batch.images:
                if cam not in batch.next_images:
                    raise BatchError(f"camera {cam!r} is in the observations but not in the next observations")
                pending.cameras.append(self._start_camera(cam, [*batch.images[cam], *batch.next_images[cam]]))
        except BatchError as exc:
            pending.error = exc
        return pending

    def finish(self, pending: PendingPixels) -> TransitionBatch:
        """The pixel batch begun by `start`; `BatchError` naming the camera whose frame did not decode."""
        images: dict[str, np.ndarray] = {}
        next_images: dict[str, np.ndarray] = {}
        for part in pending.cameras:
            try:
                part.decoding.wait()
            except ImageCodecError as exc:
                pending.error = pending.error or BatchError(f"camera {part.camera!r}: {exc}")
                continue
            if part.repeats:
                part.out[[r for r, _ in part.repeats]] = part.out[[s for _, s in part.repeats]]
            for data, row in part.decoded.items():  # the cache's free room takes them; nothing held is evicted
                if not self.cache.put(part.camera, data, part.out[row], evict=False):
                    break
            half = len(part.out) // 2
            images[part.camera], next_images[part.camera] = part.out[:half], part.out[half:]
        if pending.error is not None:
            raise pending.error
        return dataclasses.replace(pending.batch, images=images, next_images=next_images)

    def _start_camera(self, cam: str, frames: list[bytes]) -> _CameraPixels:
        """One camera's observation and next-observation frames into one (2B, H, W, 3) array (observations
        first): held frames copied in, each distinct missing frame decoding into its first row."""
        shape = self.cache.shape(cam)
        first: np.ndarray | None = None
        try:
            if shape is None:  # nothing of this camera held yet: its first frame says the shape
                first = self.decoder.decode_one(frames[0])
                shape = first.shape
            out = np.empty((len(frames), *shape), dtype=np.uint8)
            part = _CameraPixels(cam, out)
            for row in self.cache.gather(cam, frames, out):
                source = part.decoded.setdefault(frames[row], row)
                if source != row:
                    part.repeats.append((row, source))
            rows = list(part.decoded.values())
            if first is not None and rows and rows[0] == 0:  # decoded already, to learn the shape
                out[0] = first
                rows = rows[1:]
            part.decoding = self.decoder.start_into([frames[r] for r in rows], [out[r] for r in rows])
        except ImageCodecError as exc:
            raise BatchError(f"camera {cam!r}: {exc}") from exc
        return part

    # ---------------------------------------------------------------------------------------------- ahead

    def prime(self, transitions: Sequence[Transition]) -> bool:
        """Decode the frames of just-committed `transitions` in the background and keep them; False when the
        backlog is full (they decode when a batch draws them) or decoding ahead is off."""
        if self._ahead is None:
            return False
        frames: dict[str, dict[bytes, None]] = {}
        for t in transitions:
            for obs in (t.observation, t.next_observation):
                for img in obs.images:
                    frames.setdefault(img.camera, {})[img.data] = None
        if not frames:
            return True
        with self._pending_lock:
            if self._pending >= MAX_PENDING_EPISODES:
                self.primed_skipped += 1
                return False
            self._pending += 1
        self._ahead.submit(self._decode_ahead, {cam: list(f) for cam, f in frames.items()})
        return True

    def _decode_ahead(self, frames: dict[str, list[bytes]]) -> None:
        """On the background thread, one frame at a time (batches keep the decoder's threads)."""
        try:
            for cam, datas in frames.items():
                for data in datas:
                    if self._closed:
                        return
                    if (cam, data) not in self.cache:
                        self.cache.put(cam, data, self.decoder.decode_one(data))
        except Exception as exc:  # a frame that does not decode fails the batch that draws it, loudly; not here
            cause = f"{type(exc).__name__}: {exc}"
            if cause not in self._logged:
                self._logged.add(cause)
                _log.warning("frames of a committed episode were not decoded ahead (%s)", cause)
        finally:
            with self._pending_lock:
                self._pending -= 1
                self._pending_lock.notify_all()

    def wait_primed(self, timeout_s: float) -> bool:
        """Wait until every committed episode's frames are decoded ahead; False at the deadline."""
        with self._pending_lock:
            return self._pending_lock.wait_for(lambda: self._pending == 0, timeout=max(0.0, timeout_s))

    def close(self) -> None:
        self._closed = True
        if self._ahead is not None:
            self._ahead.shutdown(wait=False, cancel_futures=True)
        with self._decoder_lock:
            if self._decoder is not None:
                self._decoder.close()
