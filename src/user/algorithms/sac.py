"""Soft Actor-Critic: clipped ensemble Q targets, automatic temperature, Polyak-averaged target critics.

Also the engine of RLPD (see rlpd.py): the critic is an `EnsembleQ` of N members (2 for SAC), the TD
target takes the minimum over a random subset of `subsample` target members (all of them for SAC), a call
to `update` does `utd_ratio` critic steps on equal slices of the batch, and the actor and temperature step
once every `critic_actor_ratio` critic steps. DrQ augmentation shifts every camera image before each step.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from user.algorithms.augment import augment_obs
from user.algorithms.base import (
    Algorithm,
    AlgorithmConfig,
    AlgorithmError,
    RankSync,
    TorchBatch,
    TrainingStats,
    polyak_update,
    to_torch,
)
from user.algorithms.critics import EnsembleQ
from user.config import setting
from user.policies.base import Policy
from user.policies.draws import Draws

if TYPE_CHECKING:
    from user.buffer.batch import TransitionBatch
    from user.buffer.config import SamplerConfig


@dataclass(frozen=True)
class SACConfig(AlgorithmConfig):
    """SAC settings. The defaults are the published ones of Haarnoja et al. 2018, "Soft Actor-Critic Algorithms
    and Applications" (arXiv 1812.05905), Table 1: Adam at 3e-4 for actor, critics and temperature, discount 0.99,
    Polyak rate 0.005 every step, 256 transitions per gradient step, two 256-256 critics with the minimum taken
    (clipped double Q), target entropy -dim(A), one actor step per critic step; they are also
    stable-baselines3's SAC defaults. The initial temperature 1.0 is theirs and softlearning's (the paper's code).
    The update-to-data ratio (the paper's one gradient step per environment step) is the learner's
    `pacing.updates_per_step`. RLinf-USER's peg-insertion runs differ (gamma 0.96 at 10 Hz control, see
    config/*.yaml), and say so where they are set."""

    gamma: float = setting(0.99, "discount factor (Haarnoja et al. 2018: 0.99)", min=0.0, max=1.0)
    tau: float = setting(0.005, "Polyak rate of the target critics (Haarnoja et al. 2018: 0.005)", min=0.0, max=1.0)
    actor_lr: float = setting(3e-4, "Adam learning rate of the actor (Haarnoja et al. 2018: 3e-4)", min=0.0)
    critic_lr: float = setting(
        3e-4, "Adam learning rate of the critics and their encoder (Haarnoja et al. 2018: 3e-4)", min=0.0
    )
    temperature_lr: float = setting(
        3e-4,
        "Adam learning rate of the log-temperature (Haarnoja et al. 2018: 3e-4); 0 keeps the temperature fixed "
        "at init_temperature",
        min=0.0,
    )
    batch_size: int = setting(
        256, "transitions per update call (the buffer's sample size; Haarnoja et al. 2018: 256 per step)", min=1
    )
    num_critics: int = setting(2, "critics in the ensemble (2: clipped double Q)", min=1)
    critic_subsample: int | None = setting(None, "target = min over this many random critics; null = all")
    critic_hidden: tuple[int, ...] = setting((256, 256), "hidden widths of each critic (Haarnoja et al. 2018: 256-256)")
    critic_layer_norm: bool = setting(False, "LayerNorm after each hidden critic layer")
    actor_q: str = setting("min", "Q the actor maximises: min or mean over the ensemble", choices=("min", "mean"))
    init_temperature: float = setting(
        1.0, "initial entropy temperature alpha (stable-baselines3, softlearning: 1.0)", min=1e-8
    )
    target_entropy: float | None = setting(
        None, "entropy the temperature aims for; null = -action_dim (Haarnoja et al. 2018)"
    )
    backup_entropy: bool = setting(True, "include -alpha log pi(a'|s') in the TD target")
    utd_ratio: int = setting(
        1,
        "critic steps per update call, each on 1/utd_ratio of the batch (the update-to-data ratio itself is the "
        "learner's pacing.updates_per_step)",
        min=1,
    )
    critic_actor_ratio: int = setting(1, "critic steps per actor (and temperature) step", min=1)
    augmentation: str = setting("none", "image augmentation: none or drq (random shift)", choices=("none", "drq"))
    drq_pad: int = setting(4, "largest DrQ shift, pixels", min=0)
    grad_clip: float | None = setting(None, "clip gradient norms to this; null = no clipping")

    def entropy_target(self, action_dim: int) -> float:
        """The entropy the temperature aims for: `target_entropy`, or -action_dim when it is null."""
        return self.target_entropy if self.target_entropy is not None else -float(action_dim)

    def __post_init__(self) -> None:
        if self.critic_subsample is not None and not 1 <= self.critic_subsample <= self.num_critics:
            raise ValueError(f"critic_subsample must be in 1..num_critics ({self.num_critics})")

    def build(self, policy: Policy, seed: int) -> SAC:
        return SAC(policy, self, seed=seed)

    def rows_per_update(self) -> int:
        return self.batch_size

    def gradient_steps_per_update(self) -> int:
        return self.utd_ratio

    def auto_sampler(self, sampler: SamplerConfig) -> SamplerConfig:
        """`auto` as it is: half of each batch from demonstrations once the buffer holds any (SAC from demos),
        uniform while it holds none."""
        return sampler


# ---- losses: named functions returning (loss, info) --------------------------------------------------


def td_target(
    reward: torch.Tensor,
    terminated: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    *,
    gamma: float,
    alpha: float,
    backup_entropy: bool,
) -> torch.Tensor:
    """y = r + gamma (1 - terminated) (min_m Q'_m(s', a') - alpha log pi(a'|s')); next_q is (M, B) -> (B,)."""
    b = reward.shape[0]
    assert terminated.shape == (b,) and next_log_prob.shape == (b,) and next_q.shape[1:] == (b,), next_q.shape
    soft_q = next_q.min(dim=0).values
    if backup_entropy:
        soft_q = soft_q - alpha * next_log_prob
    return reward + gamma * (1.0 - terminated) * soft_q


def critic_loss(q: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean over members and batch of (Q_n(s, a) - y)^2; q is (N, B), target (B,)."""
    assert q.dim() == 2 and target.shape == q.shape[1:], (q.shape, target.shape)
    loss = (q - target.detach().unsqueeze(0)).pow(2).mean()
    return loss, {"q_mean": float(q.detach().mean()), "target_mean": float(target.mean())}


def actor_loss(
    q: torch.Tensor, log_prob: torch.Tensor, alpha: float, reduce: str
) -> tuple[torch.Tensor, dict[str, float]]:
    """mean(alpha log pi(a|s) - Q(s, a)) with Q the min or mean over the (N, B) ensemble values."""
    assert q.dim() == 2 and log_prob.shape == q.shape[1:], (q.shape, log_prob.shape)
    q_pi = q.min(dim=0).values if reduce == "min" else q.mean(dim=0)
    loss = (alpha * log_prob - q_pi).mean()
    return loss, {"entropy": float(-log_prob.detach().mean()), "q_pi": float(q_pi.detach().mean())}


def temperature_loss(
    log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """mean(-alpha (log pi + target_entropy)): alpha grows when the entropy falls below the target."""
    assert log_alpha.dim() == 0 and log_prob.dim() == 1
    loss = (-log_alpha.exp() * (log_prob.detach() + target_entropy)).mean()
    return loss, {"temperature": float(log_alpha.detach().exp())}


# ---- the algorithm -------------------------------------------------------------------------------------


class SAC(Algorithm):
    """SAC around any policy that samples with a log-likelihood (Gaussian MLP/CNN, flow: see sac_flow.py)."""

    policy: Policy

    def __init__(self, policy: Policy, config: SACConfig | None = None, seed: int = 0) -> None:
        self.policy = policy
        self.config = cfg = config or SACConfig()
        self.generator = torch.Generator().manual_seed(seed)  # subsample and augmentation draws
        self.draws = Draws(self.generator)  # the augmentation's per-row draws (shared by ranks: `join_ranks`)
        self._seed = seed
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            encoder = policy.encoder()
            self.critic = EnsembleQ(
                encoder,
                encoder.out_features,
                policy.action_dim,
                cfg.num_critics,
                cfg.critic_hidden,
                layer_norm=cfg.critic_layer_norm,
            ).to(policy.device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_temperature), device=policy.device, requires_grad=True)
        self.target_entropy = cfg.entropy_target(policy.action_dim)
        self.actor_optim = torch.optim.Adam(policy.actor.parameters(), lr=cfg.actor_lr)
        self.critic_optim = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.temperature_optim = torch.optim.Adam([self.log_alpha], lr=cfg.temperature_lr)
        self.critic_steps = 0
        self.actor_steps = 0

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def update(self, batch: TransitionBatch) -> TrainingStats:
        return self.update_tensors(to_torch(batch, self.policy))

    def update_prepared(self, batch: TorchBatch) -> TrainingStats:
        return self.update_tensors(batch)

    def update_tensors(self, batch: TorchBatch) -> TrainingStats:
        """`utd_ratio` critic steps on slices of `batch`, actor/temperature steps as the ratio says."""
        cfg = self.config
        if len(batch) < cfg.utd_ratio:
            raise AlgorithmError(f"a batch of {len(batch)} cannot be split into utd_ratio={cfg.utd_ratio} slices")
        losses: dict[str, float] = {}
        info: dict[str, float] = {}
        for rows in torch.arange(len(batch), device=batch.action.device).chunk(cfg.utd_ratio):
            part = self._augment(batch.select(rows))
            loss, i = self.critic_step(part)
            losses["critic"], info = float(loss.detach()), {**info, **i}
            if self.critic_steps % cfg.critic_actor_ratio == 0:
                a_losses, a_info = self.actor_step(part)
                losses.update(a_losses)
                info.update(a_info)
        info["temperature"] = self.alpha
        return TrainingStats(self.critic_steps, losses, info)

    def _augment(self, batch: TorchBatch) -> TorchBatch:
        if self.config.augmentation != "drq":
            return batch
        pad = self.config.drq_pad
        obs = augment_obs(batch.obs, pad, self.draws)  # drawn before next_obs: the generator's order
        return dataclasses.replace(batch, obs=obs, next_obs=augment_obs(batch.next_obs, pad, self.draws))

    def target_members(self) -> torch.Tensor:
        """Indices of the target critics the TD target takes its minimum over (a random subset for REDQ)."""
        n, m = self.config.num_critics, self.config.critic_subsample
        if m is None or m == n:
            return torch.arange(n)
        return torch.randperm(n, generator=self.generator)[:m]

    def critic_step(self, batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        with torch.no_grad():
            next_action, next_log_prob = self.policy.sample(batch.next_obs)
            next_q = self.target_critic(batch.next_obs, next_action)[self.target_members()]
            target = td_target(
                batch.reward,
                batch.terminated,
                next_q,
                next_log_prob,
                gamma=cfg.gamma,
                alpha=self.alpha,
                backup_entropy=cfg.backup_entropy,
            )
        loss, info = critic_loss(self.critic(batch.obs, batch.action), target)
        self._step(self.critic_optim, loss, self.critic.parameters())
        polyak_update(self.target_critic, self.critic, cfg.tau)
        self.critic_steps += 1
        return loss, info

    def actor_step(self, batch: TorchBatch) -> tuple[dict[str, float], dict[str, float]]:
        action, log_prob = self.policy.sample(batch.obs)
        with torch.no_grad():  # the actor does not train the critic's encoder
            features = self.critic.encoder(batch.obs)
        q = self.critic(batch.obs, action, features=features)
        loss, info = actor_loss(q, log_prob, self.alpha, self.config.actor_q)
        losses = {"actor": float(loss.detach())}
        extra = self.actor_regulariser(batch)
        if extra is not None:
            extra_loss, extra_losses, extra_info = extra
            loss = loss + extra_loss
            losses.update(extra_losses)
            info.update(extra_info)
        self._step(self.actor_optim, loss, self.policy.actor.parameters())
        t_loss, t_info = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
        self._step(self.temperature_optim, t_loss, [self.log_alpha])
        self.actor_steps += 1
        return {**losses, "temperature": float(t_loss.detach())}, {**info, **t_info}

    def actor_regulariser(self, batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float], dict[str, float]] | None:
        """An extra term added to the actor loss (e.g. SAC-Flow's BC on demos); SAC adds none."""
        return None

    def _step(self, optim: torch.optim.Optimizer, loss: torch.Tensor, params: Any) -> None:
        stepped = list(params)
        optim.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        if self.ranks is not None:  # every rank's share: the mean gradient is the whole batch's
            self.ranks.average_gradients(stepped)
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(stepped, self.config.grad_clip)
        optim.step()

    # ---- data-parallel -----------------------------------------------------------------------------

    def join_ranks(self, ranks: RankSync) -> None:
        """Gradients averaged at every step; augmentation and sampling noise drawn for the whole batch's rows."""
        self.ranks = ranks
        self.draws = Draws(self.generator, ranks.world_size, ranks.rank)
        noise = torch.Generator().manual_seed(self._seed + 1)  # alike on every rank
        self.policy.draws = Draws(noise, ranks.world_size, ranks.rank)

    @property
    def row_chunks(self) -> int:
        return self.config.utd_ratio

    # ---- checkpoints -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.policy.actor.state_dict(),
            "policy_version": self.policy.version,
            "critic": self.critic.state_dict(),
            "target_critic": self.target_critic.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_optim": self.actor_optim.state_dict(),
            "critic_optim": self.critic_optim.state_dict(),
            "temperature_optim": self.temperature_optim.state_dict(),
            "critic_steps": self.critic_steps,
            "actor_steps": self.actor_steps,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.actor.load_state_dict(state["actor"])
        self.policy.version = int(state["policy_version"])
        self.critic.load_state_dict(state["critic"])
        self.target_critic.load_state_dict(state["target_critic"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optim.load_state_dict(state["actor_optim"])
        self.critic_optim.load_state_dict(state["critic_optim"])
        self.temperature_optim.load_state_dict(state["temperature_optim"])
        self.critic_steps = int(state["critic_steps"])
        self.actor_steps = int(state["actor_steps"])
        self.generator.set_state(state["generator"].cpu())
