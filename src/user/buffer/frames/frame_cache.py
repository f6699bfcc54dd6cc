"""Decoded camera frames in memory, each once: the pixels of a JPEG kept by its bytes, for every camera.

The next observation of step t is the observation of step t+1, so a transition's two frames of a camera are
shared with its neighbours: keyed by the compressed bytes, a frame is decoded and held once however many
transitions (or batches) refer to it. Frames are held at the resolution batches deliver (the policy's), in blocks
of uint8 arrays per camera, FIFO by insertion, bounded by a number of frames and by a memory ceiling.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIB = 2**20
BLOCK = 256  # frames per allocated block: memory grows by blocks, never by copying what is held


@dataclass
class FrameCacheStats:
    """What the frame cache has done (cumulative)."""

    hits: int = 0  # frames a batch found decoded
    misses: int = 0  # frames a batch had to decode
    inserted: int = 0  # frames decoded and kept
    evicted: int = 0  # frames dropped for newer ones


class _Camera:
    """The frames of one camera: pixels in blocks of BLOCK frames (slot s is blocks[s // BLOCK][s % BLOCK]),
    bytes -> slot in FIFO order, free slots."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.blocks: list[np.ndarray] = []
        self.slots: OrderedDict[bytes, int] = OrderedDict()
        self.free: list[int] = []

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.blocks)

    def grow(self, limit: int) -> bool:
        """More slots, up to `limit` in all: the last block filled up to BLOCK frames, or a new block; False when
        there are `limit` slots already."""
        size = sum(len(b) for b in self.blocks)
        if size >= limit:
            return False
        if self.blocks and len(self.blocks[-1]) < BLOCK:  # a short last block (the limit was lower) grows
            old = self.blocks[-1]
            start = size - len(old)
            block = np.empty((min(BLOCK, limit - start), *self.shape), dtype=np.uint8)
            block[: len(old)] = old
            self.blocks[-1] = block
        else:
            start = size
            self.blocks.append(np.empty((min(BLOCK, limit - size), *self.shape), dtype=np.uint8))
        end = start + len(self.blocks[-1])
        self.free.extend(range(end - 1, size - 1, -1))
        return True

    def compact(self, limit: int) -> None:
        """Hold at most `limit` slots of memory: when more are allocated, the held frames move (in order) into
        new blocks just big enough, and the old blocks are freed."""
        allocated = sum(len(b) for b in self.blocks)
        if allocated <= limit:
            return
        held = list(self.slots.items())
        old_blocks, self.blocks, self.free = self.blocks, [], []
        self.slots = OrderedDict()
        while sum(len(b) for b in self.blocks) < len(held):
            self.grow(len(held))
        self.free.sort(reverse=True)
        for data, slot in held:
            new = self.free.pop()
            self.blocks[new // BLOCK][new % BLOCK] = old_blocks[slot // BLOCK][slot % BLOCK]
            self.slots[data] = new

    def write(self, slot: int, pixels: np.ndarray) -> None:
        self.blocks[slot // BLOCK][slot % BLOCK] = pixels

    def read(self, slots: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
        """out[rows[k]] <- the frame in slots[k], a block at a time."""
        which = slots // BLOCK
        for b in np.unique(which):
            sel = which == b
            out[rows[sel]] = self.blocks[int(b)][slots[sel] % BLOCK]


class FrameCache:
    """Decoded frames by (camera, compressed bytes); thread-safe. `capacity` frames per camera at most, and all
    cameras together within `max_bytes` of pixels (the memory ceiling counted in the buffer's budget)."""

    def __init__(self, capacity: int, max_bytes: int) -> None:
        self._lock = threading.Lock()
        self._cameras: dict[str, _Camera] = {}
        self._capacity = max(0, capacity)
        self.max_bytes = max(0, max_bytes)
        self.stats = FrameCacheStats()

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        """Frames per camera at most; the oldest leave when it shrinks."""
        with self._lock:
            self._capacity = max(0, capacity)
            for cam in self._cameras.values():
                self._shrink(cam)

    def _limit(self, cam: _Camera) -> int:
        """Frames `cam` may hold: the capacity, and its share of the memory ceiling (split evenly by cameras)."""
        frame_bytes = math.prod(cam.shape)
        share = self.max_bytes // max(1, len(self._cameras)) // max(1, frame_bytes)
        return min(self._capacity, share)

    def _trim(self, cam: _Camera, limit: int) -> None:
        while len(cam.slots) > max(0, limit):
            _, slot = cam.slots.popitem(last=False)
            cam.free.append(slot)
            self.stats.evicted += 1

    def _shrink(self, cam: _Camera) -> None:
        """`cam` within its limit, in frames held and in memory allocated."""
        limit = self._limit(cam)
        self._trim(cam, limit)
        cam.compact(limit)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(c.slots) for c in self._cameras.values())

    def nbytes(self) -> int:
        """Bytes of pixel memory allocated (the arrays, used or not)."""
        with self._lock:
            return sum(c.nbytes for c in self._cameras.values())

    def shape(self, camera: str) -> tuple[int, ...] | None:
        """(H, W, 3) of `camera`'s frames once one is held."""
        with self._lock:
            cam = self._cameras.get(camera)
            return None if cam is None else cam.shape

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        camera, data = key
        with self._lock:
            cam = self._cameras.get(camera)
            return cam is not None and data in cam.slots

    def put(self, camera: str, data: bytes, pixels: np.ndarray, *, evict: bool = True) -> bool:
        """Keep the decoded `pixels` of `data` (copied); when full, the oldest frame leaves (`evict`) or this one
        is not kept. False when not kept: no room, or a frame of another size than the camera's frames."""
        with self._lock:
            cam = self._cameras.get(camera)
            if cam is None:
                cam = self._cameras[camera] = _Camera(tuple(pixels.shape))
                for other in self._cameras.values():  # each camera's share of the ceiling just got smaller
                    self._shrink(other)
            if pixels.shape != cam.shape or pixels.dtype != np.uint8:
                return False
            if data in cam.slots:
                return True
            limit = self._limit(cam)
            if limit <= 0 or (len(cam.slots) >= limit and not evict):
                return False
            self._trim(cam, limit - 1)
            if not cam.free and not cam.grow(limit):
                return False
            slot = cam.free.pop()
            cam.write(slot, pixels)
            cam.slots[data] = slot
            self.stats.inserted += 1
            return True

    def gather(self, camera: str, frames: Sequence[bytes], out: np.ndarray) -> list[int]:
        """out[k] <- the pixels of frames[k] where held (`out`: (B, H, W, 3) uint8 of the camera's `shape`);
        returns the rows not held, left as they were. One lock acquisition for the whole batch."""
        with self._lock:
            cam = self._cameras.get(camera)
            if cam is None:
                self.stats.misses += len(frames)
                return list(range(len(frames)))
            lookup = cam.slots.get
            slots = np.fromiter((lookup(f, -1) for f in frames), dtype=np.int64, count=len(frames))
            held = slots >= 0
            rows = np.flatnonzero(held)
            if len(rows):
                cam.read(slots[rows], out, rows)
            missing: list[int] = np.flatnonzero(~held).tolist()
            self.stats.hits += len(rows)
            self.stats.misses += len(missing)
            return missing
