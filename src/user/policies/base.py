"""What a robot site runs: `Policy.act(obs) -> action`, weights in and out as one flat buffer, a version.

A policy owns one `actor` module (everything that acts) and its observation preprocessing. Its parameters
live in ONE contiguous buffer (`FlatParameters`), so publishing weights is a single copy and applying them
is a single `copy_`. The learner-side algorithm trains the same `actor` parameters through the torch-level
methods of the concrete policy classes; only the algorithm holds critics, targets and optimisers.

A learner whose actor is sharded over its ranks (`user.distributed.sharding`, `mark_sharded`) holds no whole copy
of it: its flat buffer is then a host buffer of the same layout that `get_weights` fills by gathering the shards
first (a collective of every rank, through the hook the learner sets with `gather_with`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from user.policies.draws import Draws

P = TypeVar("P", bound="Policy")


class PolicyError(ValueError):
    """A policy was given weights or observations that do not fit it."""


@dataclass(frozen=True)
class PolicyInput:
    """One observation as a robot site has it (numpy)."""

    state: npt.NDArray[np.float32]  # (S,) proprioception and task inputs
    images: Mapping[str, npt.NDArray[np.uint8]] = field(default_factory=dict)  # camera -> (H, W, 3) uint8


@dataclass(frozen=True)
class TensorObs:
    """A batch of preprocessed observations (torch), what actor and critic modules consume."""

    state: torch.Tensor  # (B, S) float32, normalised
    images: dict[str, torch.Tensor] = field(default_factory=dict)  # camera -> (B, 3, H, W) float32, normalised

    def __len__(self) -> int:
        return int(self.state.shape[0])

    def with_images(self, images: dict[str, torch.Tensor]) -> TensorObs:
        return TensorObs(self.state, images)

    def to(self, device: torch.device) -> TensorObs:
        """The same observations on `device` (no copy when already there)."""
        return TensorObs(self.state.to(device), {k: v.to(device) for k, v in self.images.items()})


@dataclass(frozen=True)
class WeightSpec:
    """Layout of a flat weight buffer: parameter names and shapes in order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    @property
    def numel(self) -> int:
        return sum(int(np.prod(s, dtype=np.int64)) for s in self.shapes)


@dataclass(frozen=True)
class FlatWeights:
    """All actor parameters in one contiguous 1-D tensor, with its layout and the policy version."""

    data: torch.Tensor  # (numel,) contiguous, any float dtype (cast back on load)
    spec: WeightSpec
    version: int


class FlatParameters:
    """Re-homes every parameter of `module` into one contiguous buffer (parameters become views of it).

    Optimisers work unchanged (they update the views in place). Move the module to its device BEFORE
    building this; moving afterwards would break the views.
    """

    def __init__(self, module: nn.Module) -> None:
        params = list(module.named_parameters())
        if not params:
            raise PolicyError("a policy needs at least one parameter")
        dtype, device = params[0][1].dtype, params[0][1].device
        total = sum(p.numel() for _, p in params)
        self.buffer = torch.empty(total, dtype=dtype, device=device)
        offset = 0
        for _, p in params:
            n = p.numel()
            self.buffer[offset : offset + n].copy_(p.detach().reshape(-1))
            p.data = self.buffer[offset : offset + n].view_as(p)
            offset += n
        self.spec = WeightSpec(tuple(n for n, _ in params), tuple(tuple(p.shape) for _, p in params))
        self._params = [p for _, p in params]

    def intact(self) -> bool:
        """Whether every parameter is still a view of the buffer (false after e.g. `module.to(other)`)."""
        base = self.buffer.data_ptr()
        end = base + self.buffer.numel() * self.buffer.element_size()
        return all(base <= p.data_ptr() < end for p in self._params)


class HostWeights:
    """A sharded actor's full weights, gathered into one host buffer of the actor's flat layout. Not the parameters'
    storage (`intact` is False: a copy made without gathering would be stale)."""

    def __init__(self, spec: WeightSpec, dtype: torch.dtype) -> None:
        self.spec = spec
        self.buffer = torch.zeros(spec.numel, dtype=dtype)

    def intact(self) -> bool:
        return False


Gather = Callable[[torch.Tensor], None]  # fills a sharded actor's host buffer with its full weights (a collective)


class Encoder(nn.Module):
    """Observation encoder: TensorObs -> (B, out_features)."""

    out_features: int

    def forward(self, obs: TensorObs) -> torch.Tensor:
        raise NotImplementedError


class Policy(ABC):
    """Base of every policy: preprocessing + one actor module + flat weights + version."""

    def __init__(self, actor: nn.Module, action_dim: int) -> None:
        self.actor = actor
        self.action_dim = action_dim
        self.version = 0
        self.draws = Draws()  # where sampling noise comes from: torch's generator; a learner's ranks share one
        self._flat: FlatParameters | HostWeights = FlatParameters(actor)
        self._sharded_on: torch.device | None = None  # where a sharded actor's shards live (None: not sharded)
        self._gather: Gather | None = None  # how a sharded actor's full weights are gathered (the lead's ranks)

    # ---- what a subclass provides ---------------------------------------------------------------

    @abstractmethod
    def preprocess(self, state: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> TensorObs:
        """Batch of raw observations (state (B, S), images camera -> (B, H, W, 3) uint8) -> `TensorObs`."""

    @property
    def cameras(self) -> tuple[str, ...]:
        """The cameras whose images `preprocess` needs, in order (none: the policy acts on the state alone)."""
        return ()

    @abstractmethod
    def act_tensor(self, obs: TensorObs, *, deterministic: bool) -> torch.Tensor:
        """(B, A) actions in [-1, 1] for a preprocessed batch (no gradient needed)."""

    @abstractmethod
    def encoder(self) -> Encoder:
        """A fresh observation encoder (TensorObs -> (B, F)) of this policy's kind, for a critic."""

    def sample(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions (B, A), log pi (B,)) with gradients: what SAC-style learners need. Optional."""
        raise PolicyError(f"{type(self).__name__} gives no action log-likelihood; SAC-style learners cannot train it")

    # ---- what a robot site calls ----------------------------------------------------------------

    def act(self, obs: PolicyInput, *, deterministic: bool = False) -> npt.NDArray[np.float32]:
        """One action (A,) in [-1, 1] for one observation."""
        state = np.asarray(obs.state, dtype=np.float32)[None]
        images = {k: np.asarray(v)[None] for k, v in obs.images.items()}
        with torch.no_grad():
            obs_t = self.preprocess(state, images).to(self.device)
            action = self.act_tensor(obs_t, deterministic=deterministic)
        if tuple(action.shape) != (1, self.action_dim):
            raise PolicyError(f"policy produced shape {tuple(action.shape)}, expected (1, {self.action_dim})")
        out: npt.NDArray[np.float32] = action[0].detach().cpu().numpy().astype(np.float32)
        return out

    def reset(self) -> None:  # noqa: B027 - optional hook, most policies keep no state
        """Called at an episode boundary (policies with internal state, e.g. action chunks, clear it)."""

    @property
    def device(self) -> torch.device:
        """Where the actor's parameters live (image policies preprocess onto it; state-only ones on the host)."""
        return self._sharded_on if self._sharded_on is not None else self._flat.buffer.device

    @property
    def sharded(self) -> bool:
        """Whether the actor is sharded over a learner's ranks (each holds part of every parameter)."""
        return self._sharded_on is not None

    def mark_sharded(self, device: torch.device) -> None:
        """The actor's parameters were just sharded over the learner's ranks (on `device`): they are no views of the
        flat buffer any more; from now on the full weights are gathered into a host buffer of the same layout."""
        names = tuple(n for n, _ in self.actor.named_parameters())
        if names != self._flat.spec.names:
            raise PolicyError("the sharded actor's parameters differ from its flat layout")
        self._flat = HostWeights(self._flat.spec, self._flat.buffer.dtype)
        self._sharded_on = device

    def gather_with(self, gather: Gather | None) -> None:
        """How `get_weights` gathers a sharded actor's full weights (None: it cannot, e.g. off the lead rank)."""
        self._gather = gather

    def to(self: P, device: str | torch.device) -> P:
        """Move the actor to `device` and re-home its parameters in one flat buffer there; returns self.

        Call before an algorithm is built on the policy (its optimisers hold the parameters)."""
        target = torch.device(device)
        if self.sharded and target != self.device:
            raise PolicyError(f"the actor is sharded over the learner's ranks on {self.device}; it cannot move")
        if target != self.device:
            self.actor.to(target)
            self._flat = FlatParameters(self.actor)
        return self

    @property
    def weight_spec(self) -> WeightSpec:
        return self._flat.spec

    def get_weights(self, dtype: torch.dtype | None = None) -> FlatWeights:
        """A host copy of all actor parameters as one flat tensor (optionally cast, e.g. to bfloat16 for sending).
        A sharded actor's are gathered from every rank first."""
        if isinstance(self._flat, HostWeights):
            if self._gather is None:
                raise PolicyError(
                    "the actor is sharded over the learner's ranks and no gather is possible here (only the lead "
                    "rank, through its command channel, gathers its weights)"
                )
            self._gather(self._flat.buffer)
        elif not self._flat.intact():
            raise PolicyError("actor parameters were moved off the flat buffer (moved without Policy.to?)")
        data = self._flat.buffer.detach().to(device="cpu", dtype=dtype or self._flat.buffer.dtype, copy=True)
        return FlatWeights(data, self._flat.spec, self.version)

    def load_weights(self, weights: FlatWeights) -> None:
        """Apply weights from `get_weights` of a policy of the same layout; adopts their version."""
        if self.sharded:
            raise PolicyError("the actor is sharded over the learner's ranks: weights are loaded through a checkpoint")
        if weights.spec != self._flat.spec:
            raise PolicyError("weights do not fit this policy: parameter names or shapes differ")
        if tuple(weights.data.shape) != (self._flat.spec.numel,):
            raise PolicyError(
                f"flat weights have shape {tuple(weights.data.shape)}, expected ({self._flat.spec.numel},)"
            )
        with torch.no_grad():
            self._flat.buffer.copy_(weights.data)
        self.version = weights.version
