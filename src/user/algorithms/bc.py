"""Behaviour cloning: fit the policy to the actions in the batch (demos for pretraining).

Any policy that can score an action works: Gaussian policies (MLP, CNN), the flow policy and the VLA
adapter all provide `imitation_loss(obs, action, kind) -> (loss, info)`. A chunk learner (`ChunkImitable`: a VLA
whose model is π0) is trained on whole action chunks instead, by its own loss, when the batch carries them (the
buffer's `chunk_horizon`); the learning rate follows `lr_schedule`.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from user.algorithms.base import Algorithm, AlgorithmError, RankSync, TorchBatch, TrainingStats, to_torch
from user.algorithms.lr_schedule import SCHEDULES, ScheduleKind, cosine_rate
from user.config import setting
from user.policies.base import Policy, TensorObs
from user.policies.gaussian import GaussianPolicy
from user.policies.vla import VLAPolicy

if TYPE_CHECKING:
    from user.buffer.batch import TransitionBatch


@runtime_checkable
class Imitable(Protocol):
    """A policy with an imitation objective."""

    def imitation_loss(self, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of imitating `action` (B, A) in `obs`, scalar, with diagnostics."""
        ...


@runtime_checkable
class ChunkImitable(Protocol):
    """A policy that learns whole action chunks (flow matching on the chunk, as π0 does)."""

    @property
    def learns_chunks(self) -> bool:
        """Whether `chunk_loss` is available (a VLA adapter has it only when its model has a chunk loss)."""
        ...

    def chunk_loss(
        self, obs: TensorObs, actions: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of imitating the (B, H, A) chunks in `obs`, steps where the (B, H) mask is False left out."""
        ...


class Imitating(ABC):  # noqa: B024 - only checked against (`issubclass`): no members of its own
    """The policy classes BC and HG-DAgger train (`AlgorithmConfig.trains`): those imitable by loss kind (Gaussian
    policies: mse, nll) or that learn whole chunks (VLA policies; the mse of a chunk's first action otherwise). A
    flow policy's imitation loss takes no kind (SAC-Flow trains it)."""

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool:
        return issubclass(subclass, (GaussianPolicy, VLAPolicy))


def chunk_learner(policy: object) -> ChunkImitable | None:
    """`policy` when it learns chunks, else None."""
    return policy if isinstance(policy, ChunkImitable) and policy.learns_chunks else None


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning settings."""

    lr: float = setting(3e-4, "Adam learning rate", min=0.0)
    weight_decay: float = setting(0.0, "Adam weight decay", min=0.0)
    batch_size: int = setting(256, "transitions per update call", min=1)
    loss: str = setting("mse", "mse on the mean action or nll of the action", choices=("mse", "nll"))
    grad_clip: float | None = setting(1.0, "clip the gradient norm to this; null = no clipping")
    lr_schedule: ScheduleKind = setting(
        "constant", "constant: lr throughout; cosine: warm-up, then a cosine decay (see below)", choices=SCHEDULES
    )
    warmup_steps: int = setting(
        0, "cosine: gradient steps of linear warm-up to lr", min=0, when=("lr_schedule", "cosine")
    )
    decay_steps: int = setting(
        30_000,
        "cosine: gradient steps after the warm-up over which the rate falls to its final value",
        min=1,
        when=("lr_schedule", "cosine"),
    )
    final_lr_fraction: float = setting(
        0.1, "cosine: the final rate as a fraction of lr", min=0.0, max=1.0, when=("lr_schedule", "cosine")
    )

    def rate(self, step: int) -> float:
        """The learning rate of gradient step `step` (0 = the first)."""
        if self.lr_schedule == "constant":
            return self.lr
        return cosine_rate(self.lr, step, self.warmup_steps, self.decay_steps, self.final_lr_fraction)


def bc_loss(policy: Imitable, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
    """The policy's imitation loss on (obs, action) pairs; shapes checked."""
    assert action.dim() == 2 and action.shape[0] == len(obs), (action.shape, len(obs))
    loss, info = policy.imitation_loss(obs, action, kind)
    assert loss.dim() == 0, loss.shape
    return loss, info


def bc_chunk_loss(
    policy: ChunkImitable, obs: TensorObs, chunk: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """The policy's chunk loss on (obs, chunk) pairs; shapes checked."""
    assert chunk.dim() == 3 and chunk.shape[0] == len(obs) and mask.shape == chunk.shape[:2], (chunk.shape, mask.shape)
    loss, info = policy.chunk_loss(obs, chunk, mask)
    assert loss.dim() == 0, loss.shape
    return loss, info


class BC(Algorithm):
    """Plain behaviour cloning on every row of the batch (`select` narrows the rows, see HG-DAgger); on whole
    action chunks when the policy learns chunks and the batch carries them."""

    def __init__(self, policy: Policy, config: BCConfig | None = None) -> None:
        if not isinstance(policy, Imitable) and chunk_learner(policy) is None:
            raise AlgorithmError(f"{type(policy).__name__} has no imitation_loss; BC cannot train it")
        self.policy = policy
        self.config = config or BCConfig()
        self.optim = torch.optim.Adam(
            policy.actor.parameters(), lr=self.config.rate(0), weight_decay=self.config.weight_decay
        )
        self.steps = 0

    def select(self, batch: TorchBatch) -> TorchBatch:
        """Rows to imitate: all of them."""
        return batch

    def chunk_mask(self, batch: TorchBatch) -> torch.Tensor:
        """The steps of each selected row's chunk to imitate: all those of its episode."""
        assert batch.chunk_mask is not None
        return batch.chunk_mask

    def loss(self, rows: TorchBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """The imitation loss of `rows`: the chunk loss when the policy learns chunks (the rows must carry them),
        else the loss of each row's action."""
        chunks = chunk_learner(self.policy)
        if chunks is not None and rows.action_chunk is not None:
            return bc_chunk_loss(chunks, rows.obs, rows.action_chunk, self.chunk_mask(rows))
        if chunks is not None or not isinstance(self.policy, Imitable):
            raise AlgorithmError(
                f"{type(self.policy).__name__} learns whole action chunks, and the batch carries none; set the "
                "buffer's chunk_horizon to the model's chunk size"
            )
        return bc_loss(self.policy, rows.obs, rows.action, self.config.loss)

    def update(self, batch: TransitionBatch) -> TrainingStats:
        return self.update_tensors(to_torch(batch, self.policy))

    def update_prepared(self, batch: TorchBatch) -> TrainingStats:
        return self.update_tensors(batch)

    def join_ranks(self, ranks: RankSync) -> None:
        """Each rank weighs its loss by its share of the selected rows, so the averaged gradient is the mean over
        all of them (HG-DAgger selects a different number on each rank)."""
        self.ranks = ranks

    def update_tensors(self, batch: TorchBatch) -> TrainingStats:
        rows = self.select(batch)
        n = len(rows)
        total = n if self.ranks is None else self.ranks.total(n)
        if total == 0:
            return TrainingStats(self.steps, {}, {"rows": 0.0})
        self.optim.zero_grad(set_to_none=True)
        loss, info = torch.zeros(()), dict[str, float]()
        share = 1.0 if self.ranks is None else n * self.ranks.world_size / total  # averaged: the mean over all rows
        if n > 0:
            loss, info = self.loss(rows)
            (loss * share).backward()  # type: ignore[no-untyped-call]
        elif self.policy.sharded:  # FSDP2 gathers and reduces in forward and backward: every rank takes part
            first = batch.select(torch.arange(1, device=batch.action.device))  # any row: its gradient is zeroed
            if first.chunk_mask is not None:  # a row whose chunk the HG-DAgger mask may have emptied
                first = replace(first, chunk_mask=torch.ones_like(first.chunk_mask))
            idle, _ = self.loss(first)
            (idle * 0.0).backward()  # type: ignore[no-untyped-call]
        if self.ranks is not None:  # a rank with no selected rows sends zeros
            self.ranks.average_gradients(list(self.policy.actor.parameters()))
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(list(self.policy.actor.parameters()), self.config.grad_clip)
        lr = self.config.rate(self.steps)
        for group in self.optim.param_groups:
            group["lr"] = lr
        self.optim.step()
        self.steps += 1
        weighted = float(loss.detach()) * share  # what the ranks' mean makes the loss over all their rows
        scheduled = {} if self.config.lr_schedule == "constant" else {"lr": lr}
        return TrainingStats(self.steps, {"bc": weighted}, {**info, "rows": float(total), **scheduled})

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.policy.actor.state_dict(),
            "policy_version": self.policy.version,
            "optim": self.optim.state_dict(),
            "steps": self.steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.actor.load_state_dict(state["actor"])
        self.policy.version = int(state["policy_version"])
        self.optim.load_state_dict(state["optim"])
        self.steps = int(state["steps"])
