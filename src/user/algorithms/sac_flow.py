"""SAC-Flow: Soft Actor-Critic whose actor is a flow-matching policy.

The actor's log pi(a|s) is the log-likelihood of the noise-augmented Euler path that produced `a` (flow.py): a
sum of per-step Gaussian log-densities, differentiable in the velocity and noise networks. Everything else is
SAC (the named losses in sac.py): ensemble critics, clipped TD targets, automatic temperature, Polyak targets,
`utd_ratio` / `critic_actor_ratio`, DrQ. An optional flow-matching BC term on demonstration rows keeps the
actor close to the demonstrations (offline-to-online). Gradients through K Euler steps can grow, so the
gradient norm is clipped by default.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from user.algorithms.augment import augment_obs
from user.algorithms.base import Algorithm, AlgorithmError, TorchBatch, TrainingStats, polyak_update, to_torch
from user.algorithms.critics import EnsembleQ
from user.algorithms.sac import actor_loss, critic_loss, td_target, temperature_loss
from user.buffer.batch import TransitionBatch
from user.config import setting
from user.policies.flow import FlowPolicy


@dataclass(frozen=True)
class SACFlowConfig:
    """SAC-Flow settings (SAC's, plus the flow-specific BC weight and a default gradient clip)."""

    gamma: float = setting(0.96, "discount factor", min=0.0, max=1.0)
    tau: float = setting(0.005, "Polyak rate of the target critics", min=0.0, max=1.0)
    actor_lr: float = setting(3e-4, "Adam learning rate of the flow actor", min=0.0)
    critic_lr: float = setting(3e-4, "Adam learning rate of the critics (and their encoder)", min=0.0)
    temperature_lr: float = setting(3e-4, "Adam learning rate of the log-temperature", min=0.0)
    batch_size: int = setting(256, "transitions per update call (the buffer's sample size)", min=1)
    num_critics: int = setting(2, "critics in the ensemble", min=1)
    critic_hidden: tuple[int, ...] = setting((256, 256), "hidden widths of each critic")
    critic_layer_norm: bool = setting(True, "LayerNorm after each hidden critic layer")
    actor_q: str = setting("min", "Q the actor maximises: min or mean over the ensemble", choices=("min", "mean"))
    init_temperature: float = setting(0.1, "initial entropy temperature alpha", min=1e-8)
    target_entropy: float | None = setting(None, "path entropy the temperature aims for; null = -action_dim")
    backup_entropy: bool = setting(True, "include -alpha log pi(a'|s') in the TD target")
    utd_ratio: int = setting(1, "critic steps per update call, each on 1/utd_ratio of the batch", min=1)
    critic_actor_ratio: int = setting(1, "critic steps per actor (and temperature) step", min=1)
    bc_weight: float = setting(0.0, "weight of the flow-matching loss on demo rows in the actor loss", min=0.0)
    augmentation: str = setting("none", "image augmentation: none or drq (random shift)", choices=("none", "drq"))
    drq_pad: int = setting(4, "largest DrQ shift, pixels", min=0)
    grad_clip: float | None = setting(10.0, "clip gradient norms to this; null = no clipping")


class SACFlow(Algorithm):
    """SAC around a `FlowPolicy`, with the flow's noisy-path likelihood as log pi."""

    policy: FlowPolicy

    def __init__(self, policy: FlowPolicy, config: SACFlowConfig | None = None, seed: int = 0) -> None:
        self.policy = policy
        self.config = cfg = config or SACFlowConfig()
        self.generator = torch.Generator().manual_seed(seed)  # augmentation and BC draws
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
            )
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_temperature), requires_grad=True)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -float(policy.action_dim)
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

    def update_tensors(self, batch: TorchBatch) -> TrainingStats:
        cfg = self.config
        if len(batch) < cfg.utd_ratio:
            raise AlgorithmError(f"a batch of {len(batch)} cannot be split into utd_ratio={cfg.utd_ratio} slices")
        losses: dict[str, float] = {}
        info: dict[str, float] = {}
        for rows in torch.arange(len(batch)).chunk(cfg.utd_ratio):
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
        pad, g = self.config.drq_pad, self.generator
        obs, nxt = augment_obs(batch.obs, pad, g), augment_obs(batch.next_obs, pad, g)
        return TorchBatch(obs, batch.action, batch.reward, nxt, batch.terminated, batch.is_demo, batch.intervened)

    def critic_step(self, batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        with torch.no_grad():
            next_action, next_log_prob = self.policy.sample(batch.next_obs)
            target = td_target(
                batch.reward,
                batch.terminated,
                self.target_critic(batch.next_obs, next_action),
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
        cfg = self.config
        action, log_prob = self.policy.sample(batch.obs)
        with torch.no_grad():  # the actor does not train the critic's encoder
            features = self.critic.encoder(batch.obs)
        loss, info = actor_loss(self.critic(batch.obs, action, features=features), log_prob, self.alpha, cfg.actor_q)
        losses = {"actor": float(loss.detach())}
        if cfg.bc_weight > 0 and bool(batch.is_demo.any()):
            demo = batch.select(batch.is_demo)
            bc, bc_info = self.policy.imitation_loss(demo.obs, demo.action, self.generator)
            loss = loss + cfg.bc_weight * bc
            losses["bc"] = float(bc.detach())
            info.update(bc_info)
        self._step(self.actor_optim, loss, self.policy.actor.parameters())
        t_loss, t_info = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
        self._step(self.temperature_optim, t_loss, [self.log_alpha])
        self.actor_steps += 1
        return {**losses, "temperature": float(t_loss.detach())}, {**info, **t_info}

    def _step(self, optim: torch.optim.Optimizer, loss: torch.Tensor, params: Any) -> None:
        optim.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        if self.config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(list(params), self.config.grad_clip)
        optim.step()

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
        self.generator.set_state(state["generator"])
