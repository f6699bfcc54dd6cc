"""RLPD (Ball et al. 2023): SAC with a LayerNorm critic ensemble, REDQ-style subsampled targets, and every batch
drawn half from demonstrations and half from online data.

The maths is SAC's (sac.py); what RLPD changes is configuration (`RLPDConfig` is a `SACConfig` with other
defaults) and batch composition:
- N critics (10) as one batched ensemble with LayerNorm; the TD target is the min over a random subset of
  `critic_subsample` (2) target members, redrawn every critic step; the actor maximises the ensemble mean;
- the buffer's demo/online ratio sampler mixes demonstrations into every batch (`demo_ratio`) and `update(batch)`
  takes the mix as it is, shuffled so each critic step's slice sees both kinds;
- `utd_ratio` critic steps per call and `critic_actor_ratio` critic steps per actor step (4 for peg insertion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from user.algorithms.base import TrainingStats
from user.algorithms.sac import SAC, SACConfig
from user.buffer.batch import TransitionBatch
from user.config import setting
from user.policies.gaussian import GaussianPolicy


@dataclass(frozen=True)
class RLPDConfig(SACConfig):
    """SAC's settings with RLPD's defaults (the RLinf-USER tables for peg insertion), plus the demo share of a
    batch. Only what RLPD sets differently from SAC is declared here; the rest is SAC's."""

    batch_size: int = setting(256, "transitions per update call, demos and online together", min=2)
    num_critics: int = setting(10, "critics in the LayerNorm ensemble", min=2)
    critic_subsample: int = setting(2, "TD target = min over this many randomly chosen target critics", min=1)
    critic_layer_norm: bool = setting(True, "LayerNorm after each hidden critic layer")
    actor_q: str = setting("mean", "Q the actor maximises: min or mean over the ensemble", choices=("min", "mean"))
    critic_actor_ratio: int = setting(4, "critic steps per actor step", min=1)
    demo_ratio: float = setting(0.5, "fraction of each batch drawn from demonstrations", min=0.0, max=1.0)

    def __post_init__(self) -> None:
        if self.critic_subsample > self.num_critics:
            raise ValueError(f"critic_subsample ({self.critic_subsample}) exceeds num_critics ({self.num_critics})")
        super().__post_init__()


class RLPD(SAC):
    """SAC run the RLPD way (see the module docstring)."""

    config: RLPDConfig

    def __init__(self, policy: GaussianPolicy, config: RLPDConfig | None = None, seed: int = 0) -> None:
        super().__init__(policy, config or RLPDConfig(), seed=seed)

    def update(self, batch: TransitionBatch) -> TrainingStats:
        """One update on a batch the buffer already mixed; the slices are shuffled so each sees both kinds."""
        order = np.random.default_rng(self.critic_steps).permutation(len(batch))
        stats = super().update(batch.take(order))
        info = {**stats.info, "demo_fraction": float(np.mean(batch.is_demo))}
        return TrainingStats(stats.updates, stats.losses, info)
