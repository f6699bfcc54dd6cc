"""Task-balanced sampling: one policy trained on several tasks sees every task in every batch, the ones it fails
most the most.

Drawn over all transitions, a batch follows how much data each task has: a task that is quick to collect crowds
out the others, and a task the policy already solves keeps its rows while a failing one starves. Here each batch is
split among the tasks stored, task k's share proportional to (1 - s_k) + floor, where s_k is the success rate of
its latest `window` finished online episodes (demonstrations say nothing about the policy; a task without any
finished online episode counts as failing, s_k = 0). The floor keeps a solved task in every batch, so the policy
does not forget it. Within a task the inner rule draws: RLPD's demonstration share (`demo_ratio`) or uniform.

Per-task subsets and episode outcomes are kept incrementally, like the other samplers' subsets: a batch only looks
at the rows added since the last one, and the success rate is a mean over the last `window` stored outcomes.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from user.buffer.columns import ColumnView
from user.buffer.samplers import Growable, Sampler, draw_demo_share
from user.config.strict import ConfigError

INNER_KINDS = ("demo_ratio", "uniform")


def _checked_inner(inner: str) -> str:
    if inner not in INNER_KINDS:
        raise ConfigError(
            f"balance_tasks: the {inner!r} sampler cannot be split among tasks (only {' or '.join(INNER_KINDS)})"
        )
    return inner


def split_counts(weights: np.ndarray, total: int) -> np.ndarray:
    """`total` split in proportion to `weights` by largest remainder (ties: the earlier task), then, when there are
    at least as many rows as weights, every zero count takes one row from the largest count (the earliest of
    equals): each task is seen in every batch. The counts sum to `total` exactly."""
    quotas = total * weights / weights.sum()
    counts: np.ndarray = np.floor(quotas).astype(np.int64)
    remainders = quotas - counts
    counts[np.argsort(-remainders, kind="stable")[: total - int(counts.sum())]] += 1
    if total >= len(counts):
        for k in np.flatnonzero(counts == 0):
            counts[int(np.argmax(counts))] -= 1
            counts[k] += 1
    return counts


class _TaskRows:
    """One task's transition numbers (split into demonstrations and online rows when the inner rule needs it) and
    the success flags of its finished online episodes, in commit order."""

    def __init__(self, split: bool) -> None:
        self.split = split
        self.demos, self.online, self.rows = Growable(), Growable(), Growable()
        self.outcomes = Growable()  # 1: the episode succeeded, 0: it did not

    def add(self, numbers: np.ndarray, demo: np.ndarray, outcomes: np.ndarray) -> None:
        if self.split:
            self.demos.extend(numbers[demo])
            self.online.extend(numbers[~demo])
        else:
            self.rows.extend(numbers)
        self.outcomes.extend(outcomes)

    def __len__(self) -> int:
        return len(self.demos) + len(self.online) + len(self.rows)

    def success_rate(self, window: int) -> float:
        recent = self.outcomes.array[-window:]
        return float(recent.mean()) if len(recent) else 0.0


class TaskBalancedSampler(Sampler):
    """Each batch split among the stored tasks by recent failure rate (see the module docstring); `inner` is the
    rule within a task: "demo_ratio" (a `demo_ratio` share from the task's demonstrations) or "uniform"."""

    kind = "task_balanced"

    def __init__(
        self, inner: str = "demo_ratio", demo_ratio: float = 0.5, floor: float = 0.2, window: int = 20, seed: int = 0
    ) -> None:
        super().__init__(seed)
        self.inner = _checked_inner(inner)
        self.demo_ratio = demo_ratio
        self.floor = floor
        self.window = window
        self._tasks: list[_TaskRows] = []  # by task code
        self._seen = 0
        self._lock = threading.Lock()  # `shares` is asked from a learner's stats thread while its trainer draws

    def _update(self, view: ColumnView) -> list[_TaskRows]:
        """Each task's rows, the rows added since the last call sorted in (a smaller storage: all over again)."""
        if view.size < self._seen:
            self._tasks, self._seen = [], 0
        if view.size > self._seen:
            start = self._seen
            codes, demo = view.task[start:], view.is_demo[start:]
            finished = view.done[start:] & ~demo
            self._tasks.extend(_TaskRows(self.inner == "demo_ratio") for _ in range(len(view.tasks) - len(self._tasks)))
            for code in np.unique(codes):
                mine = codes == code
                outcomes = view.success[start:][mine & finished].astype(np.int64)
                self._tasks[int(code)].add(np.flatnonzero(mine) + start, demo[mine], outcomes)
            self._seen = view.size
        return self._tasks

    def _stored(self, view: ColumnView) -> tuple[list[str], list[_TaskRows], np.ndarray]:
        """The tasks with rows to draw from (names, rows), in code order, and their unnormalised shares (all equal
        when every one is zero: a floor of 0 and every task solved)."""
        names, stored = [], []
        for code, rows in enumerate(self._update(view)):
            if len(rows):
                names.append(view.tasks[code])
                stored.append(rows)
        weights = np.asarray([1.0 - rows.success_rate(self.window) + self.floor for rows in stored], dtype=np.float64)
        if len(weights) and weights.sum() <= 0:
            weights = np.ones(len(weights))
        return names, stored, weights

    def shares(self, view: ColumnView) -> dict[str, float]:
        """Task name -> the fraction of the next batch it gets (before rounding to rows); what a learner reports."""
        with self._lock:
            names, _, weights = self._stored(view)
        return {name: float(w) for name, w in zip(names, weights / weights.sum(), strict=True)} if names else {}

    def batch_counts(self, view: ColumnView, batch_size: int) -> dict[str, int]:
        """Task name -> rows of a `batch_size` batch drawn now (`split_counts` of the shares)."""
        with self._lock:
            names, _, weights = self._stored(view)
        return {n: int(c) for n, c in zip(names, split_counts(weights, batch_size), strict=True)} if names else {}

    def candidates(self, view: ColumnView) -> int:
        with self._lock:
            return sum(len(rows) for rows in self._update(view))

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        with self._lock:
            _, stored, weights = self._stored(view)
        counts = split_counts(weights, batch_size)
        picks = [self._draw_task(rows, int(n)) for rows, n in zip(stored, counts, strict=True) if n]
        return np.concatenate(picks)

    def _draw_task(self, rows: _TaskRows, size: int) -> np.ndarray:
        if rows.split:
            return draw_demo_share(self.rng, rows.demos.array, rows.online.array, size, self.demo_ratio)
        return rows.rows.array[self.rng.integers(0, len(rows.rows), size=size)]

    def _params(self) -> dict[str, Any]:
        return {"inner": self.inner, "demo_ratio": self.demo_ratio, "floor": self.floor, "window": self.window}

    def _load_params(self, params: dict[str, Any]) -> None:
        inner = _checked_inner(str(params.get("inner", self.inner)))
        if inner != self.inner:  # the subsets are split differently: rebuilt from the storage on the next batch
            with self._lock:
                self.inner, self._tasks, self._seen = inner, [], 0
        self.demo_ratio = float(params.get("demo_ratio", self.demo_ratio))
        self.floor = float(params.get("floor", self.floor))
        self.window = int(params.get("window", self.window))
