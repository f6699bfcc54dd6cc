"""Per-transition metadata in memory, as numpy columns aligned by transition number.

Samplers and cache misses work from these columns only (never SQL on the sampling path). Columns only
grow; a `ColumnView` is a consistent snapshot that stays valid while the writer appends.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from user.buffer.disk.segments import Position
from user.buffer.errors import CorruptRowError
from user.buffer.rows import TransitionRow

_DTYPES: dict[str, type[np.generic]] = {
    "segment_id": np.int64,
    "offset": np.int64,
    "length": np.int64,
    "episode": np.int64,
    "step": np.int64,
    "policy_version": np.int64,
    "wall_ns": np.int64,
    "reward": np.float32,
    "is_demo": np.bool_,
    "intervened": np.bool_,
    "done": np.bool_,
    "success": np.bool_,
}

_TUPLE_ORDER = (
    "segment_id",
    "offset",
    "length",
    "episode",
    "step",
    "policy_version",
    "wall_ns",
    "reward",
    "is_demo",
    "intervened",
    "done",
    "success",
)


@dataclass(frozen=True)
class ColumnView:
    """The first `size` transitions' metadata; arrays are read-only views."""

    size: int
    segment_id: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    episode: np.ndarray
    step: np.ndarray
    policy_version: np.ndarray
    wall_ns: np.ndarray
    reward: np.ndarray
    is_demo: np.ndarray
    intervened: np.ndarray
    done: np.ndarray
    success: np.ndarray

    def __len__(self) -> int:
        return self.size

    def position(self, index: int) -> tuple[int, Position]:
        """(segment id, position) of transition `index`."""
        return int(self.segment_id[index]), Position(int(self.offset[index]), int(self.length[index]))


class Columns:
    """Growable columns; `extend` is called by one writer, `view` by any thread."""

    def __init__(self, capacity: int = 1024) -> None:
        self._lock = threading.Lock()
        self._size = 0
        self._arrays = {name: np.zeros(capacity, dtype=dt) for name, dt in _DTYPES.items()}

    def __len__(self) -> int:
        return self._size

    def extend(self, rows: Sequence[TransitionRow]) -> None:
        """Append rows that continue the numbering exactly; anything else is a `CorruptRowError`."""
        if not rows:
            return
        with self._lock:
            n = self._size
            for i, row in enumerate(rows):
                if row.index != n + i:
                    raise CorruptRowError(row.index, f"expected transition number {n + i} (rows must be contiguous)")
            self._reserve(n + len(rows))
            for name in _DTYPES:  # each column is the `TransitionRow` attribute of its name
                self._arrays[name][n : n + len(rows)] = [getattr(row, name) for row in rows]
            self._size = n + len(rows)

    def extend_tuples(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append rows given as tuples in `rows.COLUMN_SELECT` order (the bulk load on open)."""
        if not rows:
            return
        idx, *values = (np.asarray(col) for col in zip(*rows, strict=True))
        with self._lock:
            n = self._size
            expected = np.arange(n, n + len(rows))
            if not np.array_equal(idx, expected):
                bad = int(idx[np.flatnonzero(idx != expected)[0]])
                raise CorruptRowError(bad, "transition numbers in the index are not contiguous")
            self._reserve(n + len(rows))
            for name, column in zip(_TUPLE_ORDER, values, strict=True):
                self._arrays[name][n : n + len(rows)] = column
            self._size = n + len(rows)

    def _reserve(self, needed: int) -> None:
        capacity = len(self._arrays["offset"])
        if needed <= capacity:
            return
        while capacity < needed:
            capacity *= 2
        for name, old in self._arrays.items():
            grown = np.zeros(capacity, dtype=old.dtype)
            grown[: len(old)] = old
            self._arrays[name] = grown  # old views keep the old array alive and unchanged

    def view(self) -> ColumnView:
        with self._lock:
            n = self._size
            arrays = {}
            for name, arr in self._arrays.items():
                v = arr[:n]
                v.flags.writeable = False
                arrays[name] = v
        return ColumnView(size=n, **arrays)
