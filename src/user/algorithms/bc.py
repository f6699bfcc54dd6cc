"""Behaviour cloning: fit the policy to the actions in the batch (demos for pretraining).

Any policy that can score an action works: Gaussian policies (MLP, CNN), the flow policy and the VLA
adapter all provide `imitation_loss(obs, action, kind) -> (loss, info)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from user.algorithms.base import Algorithm, AlgorithmError, RankSync, TorchBatch, TrainingStats, to_torch
from user.config import setting
from user.policies.base import Policy, TensorObs

if TYPE_CHECKING:
    from user.buffer.batch import TransitionBatch


@runtime_checkable
class Imitable(Protocol):
    """A policy with an imitation objective."""

    def imitation_loss(self, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
        """Loss of imitating `action` (B, A) in `obs`, scalar, with diagnostics."""
        ...


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning settings."""

    lr: float = setting(3e-4, "Adam learning rate", min=0.0)
    weight_decay: float = setting(0.0, "Adam weight decay", min=0.0)
    batch_size: int = setting(256, "transitions per update call", min=1)
    loss: str = setting("mse", "mse on the mean action or nll of the action", choices=("mse", "nll"))
    grad_clip: float | None = setting(1.0, "clip the gradient norm to this; null = no clipping")


def bc_loss(policy: Imitable, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
    """The policy's imitation loss on (obs, action) pairs; shapes checked."""
    assert action.dim() == 2 and action.shape[0] == len(obs), (action.shape, len(obs))
    loss, info = policy.imitation_loss(obs, action, kind)
    assert loss.dim() == 0, loss.shape
    return loss, info


class BC(Algorithm):
    """Plain behaviour cloning on every row of the batch (`select` narrows the rows, see HG-DAgger)."""

    def __init__(self, policy: Policy, config: BCConfig | None = None) -> None:
        if not isinstance(policy, Imitable):
            raise AlgorithmError(f"{type(policy).__name__} has no imitation_loss; BC cannot train it")
        self.policy = policy
        self.config = config or BCConfig()
        self.optim = torch.optim.Adam(
            policy.actor.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay
        )
        self.steps = 0

    def select(self, batch: TorchBatch) -> TorchBatch:
        """Rows to imitate: all of them."""
        return batch

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
        assert isinstance(self.policy, Imitable)
        self.optim.zero_grad(set_to_none=True)
        loss, info = torch.zeros(()), dict[str, float]()
        share = 1.0 if self.ranks is None else n * self.ranks.world_size / total  # averaged: the mean over all rows
        if n > 0:
            loss, info = bc_loss(self.policy, rows.obs, rows.action, self.config.loss)
            (loss * share).backward()  # type: ignore[no-untyped-call]
        elif self.policy.sharded:  # FSDP2 gathers and reduces in forward and backward: every rank takes part
            first = batch.select(torch.arange(1, device=batch.action.device))  # any row: its gradient is zeroed
            idle, _ = bc_loss(self.policy, first.obs, first.action, self.config.loss)
            (idle * 0.0).backward()  # type: ignore[no-untyped-call]
        if self.ranks is not None:  # a rank with no selected rows sends zeros
            self.ranks.average_gradients(list(self.policy.actor.parameters()))
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(list(self.policy.actor.parameters()), self.config.grad_clip)
        self.optim.step()
        self.steps += 1
        weighted = float(loss.detach()) * share  # what the ranks' mean makes the loss over all their rows
        return TrainingStats(self.steps, {"bc": weighted}, {**info, "rows": float(total)})

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
