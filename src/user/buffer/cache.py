"""A bounded FIFO of decoded transitions: the newest data, in memory, in front of the segments on disk.

New transitions enter when their episode is committed; when full, the oldest leave (they stay on disk,
indexed, and are read back on a miss). Misses are not inserted: a uniform sample over a large buffer would
otherwise push the newest data out for old data that is unlikely to be drawn again soon.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from user.buffer.batch import TransitionBatch
from user.buffer.row_ring import RowRing
from user.interfaces.domain import Transition


def cache_capacity(size: int, ratio: float, stored: int) -> int:
    """Entries the cache may hold: `ratio` of the `stored` transitions when ratio > 0, else `size`."""
    if ratio > 0.0:
        return max(1, math.ceil(ratio * stored))
    return size


class TransitionCache:
    """FIFO by insertion; safe to use from several threads."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[int, Transition] = OrderedDict()
        self._capacity = max(0, capacity)
        self._rows = RowRing()  # the same transitions as columns: a batch of them without a loop
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    def set_capacity(self, capacity: int) -> None:
        with self._lock:
            self._capacity = max(0, capacity)
            self._evict()

    def put(self, index: int, transition: Transition) -> None:
        with self._lock:
            if self._capacity == 0:
                return
            self._items[index] = transition
            self._evict()
            if index in self._items:
                self._rows.put(index, transition, self._capacity)

    def get(self, index: int) -> Transition | None:
        with self._lock:
            item = self._items.get(index)
            if item is None:
                self.misses += 1
            else:
                self.hits += 1
            return item

    def get_many(self, indices: Sequence[int]) -> list[Transition | None]:
        """`get` for a whole batch under one lock acquisition (the sampling hot path)."""
        with self._lock:
            lookup = self._items.get
            found = [lookup(int(i)) for i in indices]
        hits = sum(item is not None for item in found)
        self.hits += hits
        self.misses += len(found) - hits
        return found

    def take(self, indices: np.ndarray) -> tuple[TransitionBatch | None, np.ndarray]:
        """(the batch of transitions `indices` with images as stored, which rows were cached): one lock
        acquisition and a gather per field, whatever the batch size; the rows not cached are stale, to be
        filled (`TransitionBatch.fill`); (None, all False) when none was."""
        with self._lock:
            batch, held = self._rows.take(indices)
        self.hits += int(held.sum())
        return batch, held

    def actions(self, indices: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """(the actions of transitions `indices`, which were cached): one gather of the action column; the rows
        not cached are stale; (None, all False) when none was. Not counted as hits (no transition was read)."""
        with self._lock:
            return self._rows.actions(indices)

    def __contains__(self, index: object) -> bool:
        with self._lock:
            return index in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _evict(self) -> None:
        while len(self._items) > self._capacity:
            index, _ = self._items.popitem(last=False)
            self._rows.drop(index)
