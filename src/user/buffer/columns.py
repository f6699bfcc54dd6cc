"""Per-transition metadata in memory, as numpy columns aligned by transition number.

Samplers and cache misses work from these columns only (never SQL on the sampling path). Columns only
grow; a `ColumnView` is a consistent snapshot that stays valid while the writer appends.

Tasks are kept as int32 codes into a vocabulary of names in first-seen order (transition number order), so a
buffer reopened from its index numbers its tasks exactly as the running one did, and a sampler's per-task
subsets (and a resumed sampler's draws) do not depend on how the columns were filled.
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
)  # then the task name, last (`rows.COLUMN_SELECT`)


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
    task: np.ndarray  # int32 code of each transition's task: `tasks[code]` is its name
    tasks: tuple[str, ...]  # the task names by code, first seen first; every code in `task` has its name

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
        self._arrays["task"] = np.zeros(capacity, dtype=np.int32)
        self._codes: dict[str, int] = {}  # task name -> code
        self._tasks: tuple[str, ...] = ()  # names by code (a new tuple when one is added: views keep theirs)

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
            codes, new = self._task_codes([row.task for row in rows])
            self._reserve(n + len(rows))
            for name in _DTYPES:  # each column is the `TransitionRow` attribute of its name
                self._arrays[name][n : n + len(rows)] = [getattr(row, name) for row in rows]
            self._arrays["task"][n : n + len(rows)] = codes
            self._grow(n + len(rows), new)

    def extend_tuples(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Append rows given as tuples in `rows.COLUMN_SELECT` order (the bulk load on open)."""
        if not rows:
            return
        *numeric, names = zip(*rows, strict=True)
        idx, *values = (np.asarray(col) for col in numeric)
        with self._lock:
            n = self._size
            expected = np.arange(n, n + len(rows))
            if not np.array_equal(idx, expected):
                bad = int(idx[np.flatnonzero(idx != expected)[0]])
                raise CorruptRowError(bad, "transition numbers in the index are not contiguous")
            codes, new = self._task_codes(names)
            self._reserve(n + len(rows))
            for name, column in zip(_TUPLE_ORDER, values, strict=True):
                self._arrays[name][n : n + len(rows)] = column
            self._arrays["task"][n : n + len(rows)] = codes
            self._grow(n + len(rows), new)

    def _task_codes(self, names: Sequence[Any]) -> tuple[np.ndarray, list[str]]:
        """The code of each of `names` and the names new to the vocabulary (codes from the next free one, first seen
        first). Nothing changes yet: rows that fail to load leave no name behind. No Python loop per row (the bulk
        load on open reads millions): the distinct names by hashing in C (`dict.fromkeys` keeps first-seen order,
        several times faster than sorting strings with `np.unique`), then one look-up per row in `np.fromiter`. A
        name that is not text is a `TypeError` (a damaged index)."""
        new: list[str] = []
        for name in dict.fromkeys(names):
            if type(name) is not str:
                raise TypeError(f"task {name!r:.40} is not text")
            if name not in self._codes:
                new.append(name)
        lookup = {**self._codes, **{name: len(self._tasks) + k for k, name in enumerate(new)}}
        return np.fromiter(map(lookup.__getitem__, names), dtype=np.int32, count=len(names)), new

    def _grow(self, size: int, new_tasks: list[str]) -> None:
        """Make rows up to `size` and the task names they introduce visible (under the lock, after every write)."""
        if new_tasks:
            self._codes.update({name: len(self._tasks) + k for k, name in enumerate(new_tasks)})
            self._tasks = (*self._tasks, *new_tasks)
        self._size = size

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
            tasks = self._tasks
        return ColumnView(size=n, tasks=tasks, **arrays)
