"""The cached transitions once more as columns, so a batch of cached rows is a few array gathers, not a loop.

Each field of `TransitionBatch` is one array with a row per slot; transition i sits in slot i % size (the cache
holds the newest transitions, consecutive numbers, so they never share a slot while the ring is at least as big
as the cache). A slot remembers the number it holds, so a lookup of anything else is a miss. Rows whose shapes,
state names or cameras differ from the first row stored are not kept here (their batches are collated as
before). Image columns hold references to the compressed bytes the cache already holds, not copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from user.buffer.batch import TransitionBatch
from user.interfaces.domain import Transition

FIRST_SIZE = 1024  # slots allocated at first; the ring doubles as the cache grows


@dataclass(frozen=True)
class RowShape:
    """What every row of the ring shares."""

    state: tuple[int, ...]
    action: tuple[int, ...]
    cameras: tuple[str, ...]
    next_cameras: tuple[str, ...]
    state_names: tuple[str, ...]
    next_state_names: tuple[str, ...]

    @staticmethod
    def of(t: Transition) -> RowShape:
        obs, nxt = t.observation, t.next_observation
        return RowShape(
            np.shape(obs.state),
            np.shape(t.action.data),
            tuple(img.camera for img in obs.images),
            tuple(img.camera for img in nxt.images),
            obs.state_names,
            nxt.state_names,
        )

    def fits(self, t: Transition) -> bool:
        obs, nxt = t.observation, t.next_observation
        return (
            np.shape(obs.state) == self.state
            and np.shape(nxt.state) == self.state
            and np.shape(t.action.data) == self.action
            and tuple(img.camera for img in obs.images) == self.cameras
            and tuple(img.camera for img in nxt.images) == self.next_cameras
            and obs.state_names == self.state_names
            and nxt.state_names == self.next_state_names
        )


class RowRing:
    """Columns of cached transitions by number; not thread-safe (the cache's lock guards it)."""

    def __init__(self) -> None:
        self.shape: RowShape | None = None
        self._size = 0
        self._held = np.empty(0, dtype=np.int64)  # transition number in each slot, -1: none
        self._cols: dict[str, np.ndarray] = {}

    def _allocate(self, size: int, shape: RowShape) -> dict[str, np.ndarray]:
        cols: dict[str, np.ndarray] = {
            "state": np.zeros((size, *shape.state), np.float32),
            "next_state": np.zeros((size, *shape.state), np.float32),
            "action": np.zeros((size, *shape.action), np.float32),
            "reward": np.zeros(size, np.float32),
            "policy_version": np.zeros(size, np.int64),
        }
        for flag in ("terminated", "truncated", "success", "is_demo", "intervened"):
            cols[flag] = np.zeros(size, bool)
        for cam in shape.cameras:
            cols[f"image:{cam}"] = np.empty(size, object)
        for cam in shape.next_cameras:
            cols[f"next_image:{cam}"] = np.empty(size, object)
        return cols

    def reserve(self, capacity: int) -> None:
        """Room for `capacity` consecutive numbers: the ring doubles (rows kept) until it has it."""
        if capacity <= self._size or self.shape is None:
            return
        size = max(FIRST_SIZE, self._size)
        while size < capacity:
            size *= 2
        cols = self._allocate(size, self.shape)
        held = np.full(size, -1, dtype=np.int64)
        old = np.flatnonzero(self._held >= 0)
        if len(old):
            new = self._held[old] % size
            for name, col in cols.items():
                col[new] = self._cols[name][old]
            held[new] = self._held[old]
        self._cols, self._held, self._size = cols, held, size

    def put(self, index: int, t: Transition, capacity: int) -> None:
        """Keep transition `index` (the cache holds `capacity`); a row of another shape is not kept."""
        if self.shape is None:
            self.shape = RowShape.of(t)
        if not self.shape.fits(t):
            return
        self.reserve(capacity)
        slot = index % self._size
        c = self._cols
        c["state"][slot] = t.observation.state
        c["next_state"][slot] = t.next_observation.state
        c["action"][slot] = t.action.data
        c["reward"][slot] = t.reward
        c["policy_version"][slot] = t.action.policy_version
        c["terminated"][slot], c["truncated"][slot], c["success"][slot] = t.terminated, t.truncated, t.success
        c["is_demo"][slot], c["intervened"][slot] = t.is_demo, t.action.intervened
        for img in t.observation.images:
            c[f"image:{img.camera}"][slot] = img.data
        for img in t.next_observation.images:
            c[f"next_image:{img.camera}"][slot] = img.data
        self._held[slot] = index

    def drop(self, index: int) -> None:
        """Forget transition `index` (it left the cache): its image bytes are no longer referenced here."""
        if not self._size:
            return
        slot = index % self._size
        if self._held[slot] == index:
            self._held[slot] = -1
            for col in self._cols.values():
                if col.dtype == object:
                    col[slot] = None

    def actions(self, indices: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(the actions of transitions `indices`, which of them are held here): a gather of the action column
        (action chunks); rows not held are stale; (None, all False) when nothing is held."""
        if not self._size or self.shape is None:
            return None, np.zeros(len(indices), dtype=bool)
        slots = indices % self._size
        return self._cols["action"][slots], self._held[slots] == indices

    def take(self, indices: np.ndarray) -> tuple[TransitionBatch | None, np.ndarray]:
        """(the batch of transitions `indices`, which of its rows are held here): rows not held are stale and are
        for the caller to fill; (None, all False) when none is held."""
        held = np.zeros(len(indices), dtype=bool)
        if not self._size or self.shape is None:
            return None, held
        slots = indices % self._size
        held = self._held[slots] == indices
        c, shape = self._cols, self.shape
        if not held.any() or (
            shape.state_names and shape.next_state_names and shape.state_names != shape.next_state_names
        ):
            return None, np.zeros(len(indices), dtype=bool)  # collated, the names' disagreement is an error
        batch = TransitionBatch(
            indices=np.asarray(indices, dtype=np.int64),
            **{name: c[name][slots] for name in ("state", "action", "reward", "next_state", "policy_version")},
            **{f: c[f][slots] for f in ("terminated", "truncated", "success", "is_demo", "intervened")},
            images={cam: c[f"image:{cam}"][slots] for cam in shape.cameras},
            next_images={cam: c[f"next_image:{cam}"][slots] for cam in shape.next_cameras},
            state_names=shape.state_names or shape.next_state_names,
        )
        return batch, held
