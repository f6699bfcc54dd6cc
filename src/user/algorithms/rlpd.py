"""RLPD (Ball et al. 2023): SAC with a LayerNorm critic ensemble, REDQ-style subsampled targets, and every batch
drawn half from demonstrations and half from online data.

The maths is SAC's (sac.py); what RLPD changes is configuration and batch composition:
- N critics (10) as one batched ensemble with LayerNorm; the TD target is the min over a random subset of
  `critic_subsample` (2) target members, redrawn every critic step; the actor maximises the ensemble mean;
- `update_mixed(online, demo)` concatenates an online and a demo batch (sizes from `split_batch`), or the
  buffer's demo/online ratio sampler mixes them and `update(batch)` takes the mix as it is;
- `utd_ratio` critic steps per call and `critic_actor_ratio` critic steps per actor step (4 for peg insertion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from user.algorithms.base import AlgorithmError, TrainingStats
from user.algorithms.sac import SAC, SACConfig
from user.buffer.batch import TransitionBatch
from user.config import setting
from user.policies.gaussian import GaussianPolicy


@dataclass(frozen=True)
class RLPDConfig:
    """RLPD settings; defaults from the RLinf-USER tables for peg insertion."""

    gamma: float = setting(0.96, "discount factor", min=0.0, max=1.0)
    tau: float = setting(0.005, "Polyak rate of the target critics", min=0.0, max=1.0)
    actor_lr: float = setting(3e-4, "Adam learning rate of the actor", min=0.0)
    critic_lr: float = setting(3e-4, "Adam learning rate of the critics", min=0.0)
    temperature_lr: float = setting(
        3e-4, "Adam learning rate of the log-temperature; 0 keeps the temperature fixed at init_temperature", min=0.0
    )
    batch_size: int = setting(256, "transitions per update call, demos and online together", min=2)
    demo_ratio: float = setting(0.5, "fraction of each batch drawn from demonstrations", min=0.0, max=1.0)
    num_critics: int = setting(10, "critics in the LayerNorm ensemble", min=2)
    critic_subsample: int = setting(2, "TD target = min over this many randomly chosen target critics", min=1)
    critic_hidden: tuple[int, ...] = setting((256, 256), "hidden widths of each critic")
    init_temperature: float = setting(1.0, "initial entropy temperature alpha", min=1e-8)
    target_entropy: float | None = setting(None, "entropy the temperature aims for; null = -action_dim")
    backup_entropy: bool = setting(True, "include -alpha log pi(a'|s') in the TD target")
    utd_ratio: int = setting(1, "critic steps per update call (update-to-data ratio)", min=1)
    critic_actor_ratio: int = setting(4, "critic steps per actor step", min=1)
    augmentation: str = setting("none", "image augmentation: none or drq (random shift)", choices=("none", "drq"))
    drq_pad: int = setting(4, "largest DrQ shift, pixels", min=0)
    grad_clip: float | None = setting(None, "clip gradient norms to this; null = no clipping")

    def __post_init__(self) -> None:
        if self.critic_subsample > self.num_critics:
            raise ValueError(f"critic_subsample ({self.critic_subsample}) exceeds num_critics ({self.num_critics})")

    def sac(self) -> SACConfig:
        """The SAC configuration that runs this RLPD."""
        return SACConfig(
            gamma=self.gamma,
            tau=self.tau,
            actor_lr=self.actor_lr,
            critic_lr=self.critic_lr,
            temperature_lr=self.temperature_lr,
            batch_size=self.batch_size,
            num_critics=self.num_critics,
            critic_subsample=self.critic_subsample,
            critic_hidden=self.critic_hidden,
            critic_layer_norm=True,
            actor_q="mean",
            init_temperature=self.init_temperature,
            target_entropy=self.target_entropy,
            backup_entropy=self.backup_entropy,
            utd_ratio=self.utd_ratio,
            critic_actor_ratio=self.critic_actor_ratio,
            augmentation=self.augmentation,
            drq_pad=self.drq_pad,
            grad_clip=self.grad_clip,
        )

    def split_batch(self) -> tuple[int, int]:
        """(online, demo) sample sizes of one update."""
        demo = round(self.batch_size * self.demo_ratio)
        return self.batch_size - demo, demo


def concat_batches(a: TransitionBatch, b: TransitionBatch) -> TransitionBatch:
    """Rows of `a` then rows of `b` (same cameras required)."""
    if a.images.keys() != b.images.keys():
        raise AlgorithmError(f"cannot mix batches with cameras {sorted(a.images)} and {sorted(b.images)}")

    def cat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.concatenate([x, y])

    return TransitionBatch(
        indices=cat(a.indices, b.indices),
        state=cat(a.state, b.state),
        action=cat(a.action, b.action),
        reward=cat(a.reward, b.reward),
        next_state=cat(a.next_state, b.next_state),
        terminated=cat(a.terminated, b.terminated),
        truncated=cat(a.truncated, b.truncated),
        success=cat(a.success, b.success),
        is_demo=cat(a.is_demo, b.is_demo),
        intervened=cat(a.intervened, b.intervened),
        policy_version=cat(a.policy_version, b.policy_version),
        images={k: cat(a.images[k], b.images[k]) for k in a.images},
        next_images={k: cat(a.next_images[k], b.next_images[k]) for k in a.next_images},
    )


class RLPD(SAC):
    """SAC run the RLPD way (see the module docstring)."""

    def __init__(self, policy: GaussianPolicy, config: RLPDConfig | None = None, seed: int = 0) -> None:
        self.rlpd_config = config or RLPDConfig()
        super().__init__(policy, self.rlpd_config.sac(), seed=seed)

    def update(self, batch: TransitionBatch) -> TrainingStats:
        """One update on a batch the buffer already mixed; the slices are shuffled so each sees both kinds."""
        order = np.random.default_rng(self.critic_steps).permutation(len(batch))
        stats = super().update(_rows(batch, order))
        info = {**stats.info, "demo_fraction": float(np.mean(batch.is_demo))}
        return TrainingStats(stats.updates, stats.losses, info)

    def update_mixed(self, online: TransitionBatch, demo: TransitionBatch) -> TrainingStats:
        """One update on `online` + `demo` rows (sizes from `RLPDConfig.split_batch`)."""
        return self.update(concat_batches(online, demo))


def _rows(batch: TransitionBatch, rows: np.ndarray) -> TransitionBatch:
    return TransitionBatch(
        indices=batch.indices[rows],
        state=batch.state[rows],
        action=batch.action[rows],
        reward=batch.reward[rows],
        next_state=batch.next_state[rows],
        terminated=batch.terminated[rows],
        truncated=batch.truncated[rows],
        success=batch.success[rows],
        is_demo=batch.is_demo[rows],
        intervened=batch.intervened[rows],
        policy_version=batch.policy_version[rows],
        images={k: v[rows] for k, v in batch.images.items()},
        next_images={k: v[rows] for k, v in batch.next_images.items()},
    )
