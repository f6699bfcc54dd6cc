"""SAC-Flow: Soft Actor-Critic whose actor is a flow-matching policy.

The actor's log pi(a|s) is the log-likelihood of the noise-augmented Euler path that produced `a` (flow.py): a
sum of per-step Gaussian log-densities, differentiable in the velocity and noise networks. Everything else is
SAC (the named losses in sac.py): ensemble critics, clipped TD targets, automatic temperature, Polyak targets,
`utd_ratio` / `critic_actor_ratio`, DrQ. An optional flow-matching BC term on demonstration rows keeps the
actor close to the demonstrations (offline-to-online). Gradients through K Euler steps can grow, so the
gradient norm is clipped by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from user.algorithms.base import AlgorithmError, TorchBatch
from user.algorithms.sac import SAC, SACConfig
from user.config import setting
from user.policies.base import Policy
from user.policies.flow import FlowPolicy


@dataclass(frozen=True)
class SACFlowConfig(SACConfig):
    """SAC's settings (with flow-friendly defaults) plus the weight of the flow-matching BC term."""

    critic_layer_norm: bool = setting(True, "LayerNorm after each hidden critic layer")
    init_temperature: float = setting(0.1, "initial entropy temperature alpha", min=1e-8)
    grad_clip: float | None = setting(10.0, "clip gradient norms to this (K Euler steps); null = no clipping")
    bc_weight: float = setting(0.0, "weight of the flow-matching loss on demo rows in the actor loss", min=0.0)

    trains: ClassVar[type[object]] = FlowPolicy

    def build(self, policy: Policy, seed: int) -> SACFlow:
        if not isinstance(policy, FlowPolicy):
            raise AlgorithmError(f"SAC-Flow trains a flow policy, not a {type(policy).__name__}")
        return SACFlow(policy, self, seed=seed)


class SACFlow(SAC):
    """SAC around a `FlowPolicy`, with the flow's noisy-path likelihood as log pi (its `sample`)."""

    policy: FlowPolicy
    config: SACFlowConfig

    def __init__(self, policy: FlowPolicy, config: SACFlowConfig | None = None, seed: int = 0) -> None:
        super().__init__(policy, config or SACFlowConfig(), seed)

    def actor_regulariser(self, batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float], dict[str, float]] | None:
        """Flow-matching BC on the demonstration rows of the batch, weighted by `bc_weight`: the mean over every
        demonstration row of the global batch. On ranks, each weighs its rows' mean by its share of them (a rank may
        hold none), so the averaged gradient and the averaged figures are those of one process."""
        if self.config.bc_weight <= 0:
            return None
        demo = batch.is_demo
        n = int(demo.sum())
        total = n if self.ranks is None else self.ranks.total(n)  # every rank asks, so all return alike
        if total == 0:
            return None
        share = 1.0 if self.ranks is None else n * self.ranks.world_size / total
        bc, info = self.policy.imitation_loss(batch.obs, batch.action, self.draws, rows=demo)  # draws for every row
        if n == 0:  # no demonstration here: no gradient from this rank, the same figures as the others (zeros)
            bc = torch.zeros((), device=batch.action.device)
            info = dict.fromkeys(info, 0.0)
        weighted = {k: v * share for k, v in info.items()}
        return self.config.bc_weight * bc * share, {"bc": float(bc.detach()) * share}, weighted
