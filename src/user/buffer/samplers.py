"""Samplers: which transitions a batch draws (by number), each with `state_dict`/`load_state_dict`.

Like torchrl's samplers they see only the storage's metadata columns, never the data. Subsets (demos,
interventions, policy versions) are kept incrementally: each sample only looks at rows added since the
last one. A sampler's state is its parameters and random generator; subsets are rebuilt from the storage.
Batches split among tasks (several tasks, one policy) are `user.buffer.task_sampler`'s, built here too.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from user.buffer.columns import ColumnView
from user.buffer.config import SamplerConfig
from user.buffer.errors import BufferError, NotReadyError


class Growable:
    """An int64 array that grows by doubling."""

    def __init__(self) -> None:
        self._data = np.zeros(64, dtype=np.int64)
        self._size = 0

    def extend(self, values: np.ndarray) -> None:
        need = self._size + len(values)
        if need > len(self._data):
            grown = np.zeros(max(need, 2 * len(self._data)), dtype=np.int64)
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        self._data[self._size : need] = values
        self._size = need

    @property
    def array(self) -> np.ndarray:
        return self._data[: self._size]

    def __len__(self) -> int:
        return self._size


class _Subset:
    """Numbers of the transitions for which `predicate(view, start, stop)` is true, kept up to date."""

    def __init__(self, predicate: Callable[[ColumnView, int, int], np.ndarray]) -> None:
        self._predicate = predicate
        self._seen = 0
        self.members = Growable()

    def update(self, view: ColumnView) -> np.ndarray:
        if view.size < self._seen:  # a smaller storage (a fresh open): start over
            self._seen, self.members = 0, Growable()
        if view.size > self._seen:
            mask = self._predicate(view, self._seen, view.size)
            self.members.extend(np.flatnonzero(mask) + self._seen)
            self._seen = view.size
        return self.members.array


def draw_demo_share(
    rng: np.random.Generator, demos: np.ndarray, online: np.ndarray, size: int, ratio: float
) -> np.ndarray:
    """`size` numbers, round(size * ratio) of them drawn from `demos` and the rest from `online` (all from whichever
    side holds any while the other is empty; at least one must): RLPD's split, shared by every sampler using it so
    that they draw alike from the same generator."""
    n_demo = round(size * ratio)
    if len(demos) == 0:
        n_demo = 0
    elif len(online) == 0:
        n_demo = size
    picks = [demos[rng.integers(0, len(demos), size=n_demo)]] if n_demo else []
    if size - n_demo:
        picks.append(online[rng.integers(0, len(online), size=size - n_demo)])
    return np.concatenate(picks)


class Sampler(ABC):
    """Base of all samplers: a seeded generator and the policy version learners report."""

    kind: ClassVar[str]

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.policy_version: int | None = None

    def set_policy_version(self, version: int) -> None:
        """The learner's current policy version (used by staleness-aware sampling)."""
        self.policy_version = version

    @abstractmethod
    def candidates(self, view: ColumnView) -> int:
        """How many transitions this sampler can draw from."""

    @abstractmethod
    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray: ...

    def sample(self, view: ColumnView, batch_size: int) -> np.ndarray:
        """`batch_size` transition numbers (with replacement); `NotReadyError` when there is nothing to draw."""
        if self.candidates(view) == 0:
            raise NotReadyError(f"{self.kind} sampler: no transitions to sample from yet ({view.size} stored)")
        return self._draw(view, batch_size).astype(np.int64, copy=False)

    def _params(self) -> dict[str, Any]:
        return {}

    def _load_params(self, params: dict[str, Any]) -> None:
        del params

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "rng": self.rng.bit_generator.state,
            "policy_version": self.policy_version,
            "params": self._params(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise BufferError(f"sampler state is for {state.get('kind')!r}, this sampler is {self.kind!r}")
        self.rng.bit_generator.state = state["rng"]
        self.policy_version = state.get("policy_version")
        self._load_params(dict(state.get("params", {})))


class UniformSampler(Sampler):
    """Every stored transition equally likely."""

    kind = "uniform"

    def candidates(self, view: ColumnView) -> int:
        return view.size

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        return self.rng.integers(0, view.size, size=batch_size)


class RecentSampler(Sampler):
    """Uniform over the newest `window` transitions."""

    kind = "recent"

    def __init__(self, window: int, seed: int = 0) -> None:
        super().__init__(seed)
        self.window = window

    def candidates(self, view: ColumnView) -> int:
        return min(view.size, self.window)

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        return self.rng.integers(max(0, view.size - self.window), view.size, size=batch_size)

    def _params(self) -> dict[str, Any]:
        return {"window": self.window}

    def _load_params(self, params: dict[str, Any]) -> None:
        self.window = int(params.get("window", self.window))


class StalenessSampler(Sampler):
    """Weights transitions by how many policy versions old they are: exp(-staleness / temperature), and
    leaves out those older than `max_staleness` (-1: none left out; temperature 0: equal weights)."""

    kind = "staleness"

    def __init__(self, max_staleness: int = -1, temperature: float = 0.0, seed: int = 0) -> None:
        super().__init__(seed)
        self.max_staleness = max_staleness
        self.temperature = temperature
        self._by_version: dict[int, Growable] = {}
        self._seen = 0

    def _update(self, view: ColumnView) -> None:
        if view.size < self._seen:
            self._by_version, self._seen = {}, 0
        if view.size == self._seen:
            return
        versions = view.policy_version[self._seen : view.size]
        for v in np.unique(versions):
            members = np.flatnonzero(versions == v) + self._seen
            self._by_version.setdefault(int(v), Growable()).extend(members)
        self._seen = view.size

    def _weights(self, view: ColumnView) -> tuple[list[int], np.ndarray]:
        self._update(view)
        current = self.policy_version if self.policy_version is not None else max(self._by_version, default=0)
        versions, weights = [], []
        for v, members in sorted(self._by_version.items()):  # by version, not arrival: resumes draw the same
            staleness = max(0, current - v)
            if self.max_staleness >= 0 and staleness > self.max_staleness:
                continue
            w = math.exp(-staleness / self.temperature) if self.temperature > 0 else 1.0
            versions.append(v)
            weights.append(w * len(members))
        return versions, np.asarray(weights, dtype=np.float64)

    def candidates(self, view: ColumnView) -> int:
        versions, weights = self._weights(view)
        return int(sum(len(self._by_version[v]) for v, w in zip(versions, weights, strict=True) if w > 0))

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        versions, weights = self._weights(view)
        chosen = self.rng.choice(len(versions), size=batch_size, p=weights / weights.sum())
        out = np.empty(batch_size, dtype=np.int64)
        for k in np.unique(chosen):
            members = self._by_version[versions[k]].array
            slots = np.flatnonzero(chosen == k)
            out[slots] = members[self.rng.integers(0, len(members), size=len(slots))]
        return out

    def _params(self) -> dict[str, Any]:
        return {"max_staleness": self.max_staleness, "temperature": self.temperature}

    def _load_params(self, params: dict[str, Any]) -> None:
        self.max_staleness = int(params.get("max_staleness", self.max_staleness))
        self.temperature = float(params.get("temperature", self.temperature))


class DemoRatioSampler(Sampler):
    """RLPD's symmetric sampling: `ratio` of every batch from demonstrations, the rest from online data
    (all from whichever side exists while the other is empty)."""

    kind = "demo_ratio"

    def __init__(self, ratio: float = 0.5, seed: int = 0) -> None:
        super().__init__(seed)
        self.ratio = ratio
        self._demos = _Subset(lambda v, a, b: v.is_demo[a:b])
        self._online = _Subset(lambda v, a, b: ~v.is_demo[a:b])

    def candidates(self, view: ColumnView) -> int:
        return len(self._demos.update(view)) + len(self._online.update(view))

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        return draw_demo_share(self.rng, self._demos.update(view), self._online.update(view), batch_size, self.ratio)

    def _params(self) -> dict[str, Any]:
        return {"ratio": self.ratio}

    def _load_params(self, params: dict[str, Any]) -> None:
        self.ratio = float(params.get("ratio", self.ratio))


class InterventionSampler(Sampler):
    """HG-DAgger: only steps where a human took over (and demonstrations, if `include_demos`)."""

    kind = "intervention"

    def __init__(self, include_demos: bool = True, seed: int = 0) -> None:
        super().__init__(seed)
        self.include_demos = include_demos
        self._members = self._subset()

    def _subset(self) -> _Subset:
        if self.include_demos:
            return _Subset(lambda v, a, b: v.intervened[a:b] | v.is_demo[a:b])
        return _Subset(lambda v, a, b: v.intervened[a:b])

    def candidates(self, view: ColumnView) -> int:
        return len(self._members.update(view))

    def _draw(self, view: ColumnView, batch_size: int) -> np.ndarray:
        members = self._members.update(view)
        return members[self.rng.integers(0, len(members), size=batch_size)]

    def _params(self) -> dict[str, Any]:
        return {"include_demos": self.include_demos}

    def _load_params(self, params: dict[str, Any]) -> None:
        include = bool(params.get("include_demos", self.include_demos))
        if include != self.include_demos:
            self.include_demos = include
            self._members = self._subset()


def make_sampler(config: SamplerConfig) -> Sampler:
    """The sampler `config.kind` names, with its parameters; with `balance_tasks`, that kind's rule within each
    task of a `TaskBalancedSampler` (auto: demo_ratio)."""
    if config.balance_tasks:
        from user.buffer.task_sampler import TaskBalancedSampler  # it builds on this module's `Sampler`

        inner = "demo_ratio" if config.kind == "auto" else config.kind
        return TaskBalancedSampler(inner, config.demo_ratio, config.task_floor, config.task_window, config.seed)
    if config.kind == "uniform":
        return UniformSampler(config.seed)
    if config.kind == "recent":
        return RecentSampler(config.window, config.seed)
    if config.kind == "staleness":
        return StalenessSampler(config.max_staleness, config.staleness_temperature, config.seed)
    if config.kind in ("demo_ratio", "auto"):  # auto: uniform until demonstrations are stored (`DemoRatioSampler`)
        return DemoRatioSampler(config.demo_ratio, config.seed)
    return InterventionSampler(config.include_demos, config.seed)
