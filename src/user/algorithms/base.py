"""What only the learner holds: the `Algorithm` interface, the settings class of each kind that builds it
(`AlgorithmConfig`), typed torch batches, stats and checkpoint state.

`update(batch)` is `update_prepared(prepare(batch))`: `prepare` (preprocessing, the copy to the device) reads no
training state, so the learner may run it one batch ahead on another CUDA stream (`user.learner.prefetch`).
The buffer's types are imported for annotations only, so the algorithms load without the buffer's storage
libraries (the GPU benchmark runs on machines that have only torch, numpy and pyyaml)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from user.policies.base import Policy, TensorObs

if TYPE_CHECKING:
    from user.buffer.batch import TransitionBatch
    from user.buffer.config import SamplerConfig


class AlgorithmError(ValueError):
    """An algorithm was given a batch or checkpoint that does not fit it."""


@dataclass(frozen=True)
class TrainingStats:
    """What one `update` did: the update counter after it, loss values and diagnostics (floats, for logs)."""

    updates: int  # gradient steps of the algorithm so far (critic steps for actor-critic methods)
    losses: Mapping[str, float] = field(default_factory=dict)  # loss name -> value
    info: Mapping[str, float] = field(default_factory=dict)  # diagnostics: q values, entropy, temperature ...


@dataclass(frozen=True)
class TorchBatch:
    """A `TransitionBatch` preprocessed by the policy, as torch tensors."""

    obs: TensorObs  # B observations
    action: torch.Tensor  # (B, A) float32 in [-1, 1]
    reward: torch.Tensor  # (B,) float32
    next_obs: TensorObs  # B next observations
    terminated: torch.Tensor  # (B,) float32: 1 = no bootstrapping from next_obs
    is_demo: torch.Tensor  # (B,) bool
    intervened: torch.Tensor  # (B,) bool
    action_chunk: torch.Tensor | None = None  # (B, H, A) float32: the step's action and its episode's next ones
    chunk_mask: torch.Tensor | None = None  # (B, H) bool: False past the episode's end
    chunk_intervened: torch.Tensor | None = None  # (B, H) bool: a human chose that action

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> TorchBatch:
        """This batch with `fn` applied to every per-row tensor (the observations' state and images too; the
        chunk's where it has one)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, TensorObs):
                out[f.name] = TensorObs(fn(value.state), {k: fn(v) for k, v in value.images.items()})
            elif value is not None:
                out[f.name] = fn(value)
        return TorchBatch(**out)

    def to(self, device: torch.device) -> TorchBatch:
        """The same batch on `device`; to a GPU from pinned host memory, without blocking the host."""
        return self.map(lambda t: to_device(t, device))

    def select(self, rows: torch.Tensor) -> TorchBatch:
        """The sub-batch at `rows` (indices or boolean mask)."""
        return self.map(lambda t: t[rows])


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`t` on `device`: host tensors go to a GPU through pinned memory with a non-blocking copy (ordered on the
    current stream, so whoever uses the result on that stream sees it whole)."""
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def to_torch(batch: TransitionBatch, policy: Policy) -> TorchBatch:
    """Preprocess a buffer batch with the policy's observation config, on the policy's device; shapes checked."""
    n = len(batch)
    if batch.action.shape != (n, policy.action_dim):
        raise AlgorithmError(f"batch actions have shape {batch.action.shape}, the policy acts in {policy.action_dim}")
    out = TorchBatch(
        obs=policy.preprocess(batch.state, batch.images),
        action=torch.as_tensor(np.asarray(batch.action, dtype=np.float32)),
        reward=torch.as_tensor(np.asarray(batch.reward, dtype=np.float32)),
        next_obs=policy.preprocess(batch.next_state, batch.next_images),
        terminated=torch.as_tensor(np.asarray(batch.terminated, dtype=np.float32)),
        is_demo=torch.as_tensor(np.asarray(batch.is_demo, dtype=bool)),
        intervened=torch.as_tensor(np.asarray(batch.intervened, dtype=bool)),
        **_chunk_tensors(batch, policy.action_dim),
    )
    assert out.reward.shape == (n,) and out.terminated.shape == (n,)
    return out.to(policy.device)


def _chunk_tensors(batch: TransitionBatch, action_dim: int) -> dict[str, torch.Tensor]:
    """The batch's action chunks as tensors, shapes checked; none when it carries none."""
    chunk, mask, intervened = batch.action_chunk, batch.chunk_mask, batch.chunk_intervened
    if chunk is None or mask is None or intervened is None:
        return {}
    n, horizon = len(batch), chunk.shape[1] if chunk.ndim == 3 else -1
    if chunk.shape != (n, horizon, action_dim) or mask.shape != (n, horizon) or intervened.shape != (n, horizon):
        raise AlgorithmError(
            f"batch action chunks have shape {chunk.shape} (mask {mask.shape}, intervened {intervened.shape}); "
            f"the policy acts in {action_dim}, the batch has {n} rows"
        )
    return {
        "action_chunk": torch.as_tensor(np.asarray(chunk, dtype=np.float32)),
        "chunk_mask": torch.as_tensor(np.asarray(mask, dtype=bool)),
        "chunk_intervened": torch.as_tensor(np.asarray(intervened, dtype=bool)),
    }


def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- (1 - tau) target + tau source, parameter by parameter."""
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters(), strict=True):
            t.lerp_(s, tau)


class RankSync(Protocol):
    """What a data-parallel algorithm asks of the learner's ranks (`user.distributed.data_parallel.DataParallel`)."""

    @property
    def world_size(self) -> int: ...

    @property
    def rank(self) -> int: ...

    def average_gradients(self, params: Iterable[torch.Tensor]) -> None:
        """Each gradient replaced by its mean over the ranks."""
        ...

    def total(self, count: int) -> int:
        """The sum of `count` over the ranks."""
        ...


class Algorithm(ABC):
    """A learner-side algorithm around a policy: `update(batch) -> TrainingStats`, checkpoint state.

    Data-parallel (`join_ranks`): every rank runs `update_tensors` on its share of one global batch (the lead
    orders the batch with `row_order` and `row_chunks` first), gradients are averaged over the ranks before every
    optimizer step, and every row's random draws are the ones one process would make, so the ranks train as one."""

    policy: Policy
    ranks: RankSync | None = None  # the ranks this algorithm trains with (None: one process)

    @abstractmethod
    def update(self, batch: TransitionBatch) -> TrainingStats:
        """One training step on a buffer batch (may be several gradient steps, e.g. UTD > 1)."""

    def join_ranks(self, ranks: RankSync) -> None:
        """Train as one of `ranks` from now on (see the class docstring); `AlgorithmError` where not supported."""
        raise AlgorithmError(f"{type(self).__name__} does not train data-parallel")

    def row_order(self, rows: int) -> npt.NDArray[np.int64] | None:
        """The order the rows of a global batch of `rows` are trained in (None: as drawn), decided on the lead."""
        return None

    @property
    def row_chunks(self) -> int:
        """How many consecutive slices one update splits its batch into (e.g. one per gradient step of UTD > 1)."""
        return 1

    def prepare(self, batch: TransitionBatch) -> TorchBatch:
        """`batch` as tensors on the policy's device: the part of `update` that reads no training state."""
        return to_torch(batch, self.policy)

    def update_prepared(self, batch: TorchBatch) -> TrainingStats:
        """`update` on a batch `prepare` made: `update(b)` and `update_prepared(prepare(b))` train alike."""
        raise AlgorithmError(f"{type(self).__name__} does not train on prepared batches")

    @property
    def trains_prepared(self) -> bool:
        """Whether `update_prepared` is implemented (a prefetcher may prepare batches ahead)."""
        return type(self).update_prepared is not Algorithm.update_prepared

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume bit-exactly: modules, optimisers, counters (tensors and plain values)."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what `state_dict` returned."""


class AlgorithmConfig(ABC):
    """The settings of one algorithm kind, and what builds that algorithm from them: the section a learner selects
    by name (`user.algorithms.registry`), with what the algorithm asks of the learner's batches and buffer."""

    trains: ClassVar[type[object]] = Policy  # the policy classes it can train: this one and its subclasses

    @abstractmethod
    def build(self, policy: Policy, seed: int) -> Algorithm:
        """The algorithm training `policy`, its random draws seeded with `seed`."""

    @abstractmethod
    def rows_per_update(self) -> int:
        """Rows of the batch one `update` call takes."""

    @abstractmethod
    def gradient_steps_per_update(self) -> int:
        """Gradient (critic) steps one `update` call takes."""

    def auto_sampler(self, sampler: SamplerConfig) -> SamplerConfig:
        """What the buffer's `auto` sampler becomes for this algorithm: `sampler` as it is unless it says otherwise."""
        return sampler
