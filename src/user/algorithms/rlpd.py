"""RLPD (Ball et al. 2023, "Efficient Online Reinforcement Learning with Offline Data", arXiv 2302.02948): SAC
with a LayerNorm critic ensemble, REDQ-style subsampled targets, and every batch drawn half from demonstrations
and half from online data.

The maths is SAC's (sac.py); what RLPD changes is configuration (`RLPDConfig` is a `SACConfig` with other
defaults) and batch composition:
- N critics (10) as one batched ensemble with LayerNorm; the TD target is the min over a random subset of
  `critic_subsample` (2) target members, redrawn every critic step; the actor maximises the ensemble mean;
- the buffer's demo/online ratio sampler mixes demonstrations into every batch (`demo_ratio`) and `update(batch)`
  takes the mix as it is, shuffled so each critic step's slice sees both kinds;
- `utd_ratio` critic steps per call and `critic_actor_ratio` critic steps per actor step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from user.algorithms.base import TorchBatch, TrainingStats
from user.algorithms.sac import SAC, SACConfig
from user.config import setting
from user.policies.base import Policy

if TYPE_CHECKING:
    from user.buffer.batch import TransitionBatch
    from user.buffer.config import SamplerConfig


@dataclass(frozen=True)
class RLPDConfig(SACConfig):
    """SAC's settings with RLPD's defaults, plus the demo share of a batch. Only what RLPD sets differently from
    SAC is declared here; the rest is SAC's, which RLPD keeps (Ball et al. 2023 and their code, ikostrikov/rlpd
    configs/rlpd_config.py: discount 0.99, Adam 3e-4 for actor, critics and temperature, Polyak
    rate 0.005, initial temperature 1.0, 256-256 networks, batch 256). RLPD's own: 10 LayerNorm critics, the
    target over 2 of them, the actor on their mean, target entropy -dim(A)/2, 128 + 128 demo/online rows.

    One `update` call is one step of their code at its default update-to-data ratio of 1 (one critic and one
    actor step on 256 rows). The paper's UTD of 20 (20 critic steps, then one actor step, per environment step)
    is the learner's `pacing.updates_per_step: 20` with `critic_actor_ratio: 20`; `utd_ratio: 20` with
    `batch_size: 5120` takes those 20 critic steps in one call, as their code does. RLinf-USER's peg-insertion
    runs use gamma 0.96, utd 4, critic:actor 4 and a fixed temperature (config/*.yaml says so)."""

    batch_size: int = setting(
        256, "transitions per update call, demos and online together (Ball et al. 2023: 128 + 128)", min=2
    )
    num_critics: int = setting(10, "critics in the LayerNorm ensemble (Ball et al. 2023: 10)", min=2)
    critic_subsample: int = setting(
        2, "TD target = min over this many randomly chosen target critics (Ball et al. 2023: 2)", min=1
    )
    critic_layer_norm: bool = setting(True, "LayerNorm after each hidden critic layer (Ball et al. 2023)")
    actor_q: str = setting(
        "mean",
        "Q the actor maximises: min or mean over the ensemble (Ball et al. 2023: mean)",
        choices=("min", "mean"),
    )
    target_entropy: float | None = setting(
        None, "entropy the temperature aims for; null = -action_dim / 2 (Ball et al. 2023)"
    )
    demo_ratio: float = setting(
        0.5, "fraction of each batch drawn from demonstrations (Ball et al. 2023: 0.5)", min=0.0, max=1.0
    )

    def entropy_target(self, action_dim: int) -> float:
        """The entropy the temperature aims for: `target_entropy`, or -action_dim / 2 when it is null."""
        return self.target_entropy if self.target_entropy is not None else -action_dim / 2.0

    def __post_init__(self) -> None:
        if self.critic_subsample > self.num_critics:
            raise ValueError(f"critic_subsample ({self.critic_subsample}) exceeds num_critics ({self.num_critics})")
        super().__post_init__()

    def build(self, policy: Policy, seed: int) -> RLPD:
        return RLPD(policy, self, seed=seed)

    def auto_sampler(self, sampler: SamplerConfig) -> SamplerConfig:
        """Demonstrations mixed into every batch at RLPD's own share (`demo_ratio`)."""
        return replace(sampler, kind="demo_ratio", demo_ratio=self.demo_ratio)


class RLPD(SAC):
    """SAC run the RLPD way (see the module docstring)."""

    config: RLPDConfig

    def __init__(self, policy: Policy, config: RLPDConfig | None = None, seed: int = 0) -> None:
        super().__init__(policy, config or RLPDConfig(), seed=seed)

    def row_order(self, rows: int) -> npt.NDArray[np.int64]:
        """The shuffle of a batch's rows before it is sliced, so each slice sees demonstrations and online data."""
        order: npt.NDArray[np.int64] = np.random.default_rng(self.critic_steps).permutation(rows)
        return order

    def update(self, batch: TransitionBatch) -> TrainingStats:
        """One update on a batch the buffer already mixed; the slices are shuffled so each sees both kinds."""
        order = self.row_order(len(batch))
        stats = super().update(batch.take(order))
        info = {**stats.info, "demo_fraction": float(np.mean(batch.is_demo))}
        return TrainingStats(stats.updates, stats.losses, info)

    def update_prepared(self, batch: TorchBatch) -> TrainingStats:
        """`update` on a prepared batch: the same shuffle of its rows (drawn when the update runs), on the device."""
        order = self.row_order(len(batch))
        stats = self.update_tensors(batch.select(torch.as_tensor(order, device=batch.action.device)))
        info = {**stats.info, "demo_fraction": float(batch.is_demo.sum()) / len(batch)}
        return TrainingStats(stats.updates, stats.losses, info)
