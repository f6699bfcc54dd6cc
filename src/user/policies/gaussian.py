"""Tanh-squashed Gaussian action head and the policy family built on it (MLP and CNN policies)."""

from __future__ import annotations

import itertools
import math
from abc import abstractmethod
from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.policies.base import Encoder, Policy, TensorObs
from user.policies.draws import Draws

LOG_2 = math.log(2.0)


def mlp(sizes: Sequence[int], *, layer_norm: bool = False, final_activation: bool = True) -> nn.Sequential:
    """Linear layers through `sizes` with ReLU (and LayerNorm before it when asked)."""
    layers: list[nn.Module] = []
    for k, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        last = k == len(sizes) - 2
        if not last or final_activation:
            if layer_norm:
                layers.append(nn.LayerNorm(b))
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """sum_i log(1 - tanh(u_i)^2), computed stably as 2 (log 2 - u - softplus(-2u)); (B, A) -> (B,)."""
    return (2.0 * (LOG_2 - u - F.softplus(-2.0 * u))).sum(-1)


def gaussian_log_prob(u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """log N(u; mean, exp(log_std)) summed over the last axis; (B, A) -> (B,)."""
    z = (u - mean) / log_std.exp()
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)).sum(-1)


def tanh_gaussian_sample(
    mean: torch.Tensor, log_std: torch.Tensor, draws: Draws | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised sample a = tanh(mean + std * eps) and its log-density under the squashed Gaussian."""
    eps = (draws or Draws()).normal_like(mean)
    u = mean + log_std.exp() * eps
    return torch.tanh(u), gaussian_log_prob(u, mean, log_std) - tanh_log_det(u)


def tanh_gaussian_log_prob(
    action: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """Log-density of given actions in (-1, 1) (clipped to +-(1 - eps)); (B, A) -> (B,)."""
    a = action.clamp(-1.0 + eps, 1.0 - eps)
    u = torch.atanh(a)
    return gaussian_log_prob(u, mean, log_std) - tanh_log_det(u)


class TanhGaussianHead(nn.Module):
    """features (B, F) -> mean (B, A), log_std (B, A) with log_std squashed into [log_std_min, log_std_max]."""

    def __init__(self, features: int, action_dim: int, log_std_min: float, log_std_max: float) -> None:
        super().__init__()
        self.linear = nn.Linear(features, 2 * action_dim)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = self.linear(x).chunk(2, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw) + 1.0)
        return mean, log_std


class GaussianActor(nn.Module):
    """encoder (TensorObs -> (B, F)) -> MLP trunk -> tanh-Gaussian head."""

    def __init__(self, encoder: Encoder, trunk: nn.Module, head: TanhGaussianHead) -> None:
        super().__init__()
        self.encoder, self.trunk, self.head = encoder, trunk, head

    def forward(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.head(self.trunk(self.encoder(obs)))
        return mean, log_std


class GaussianPolicy(Policy):
    """A policy whose actor is a `GaussianActor`; the torch-level methods are what algorithms train."""

    actor: GaussianActor

    @abstractmethod
    def encoder(self) -> Encoder: ...

    def dist_params(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs)
        assert mean.shape == (len(obs), self.action_dim), mean.shape
        return mean, log_std

    def sample(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions (B, A) and their log-probabilities (B,)."""
        return tanh_gaussian_sample(*self.dist_params(obs), self.draws)

    def act_tensor(self, obs: TensorObs, *, deterministic: bool) -> torch.Tensor:
        if deterministic:
            return torch.tanh(self.dist_params(obs)[0])
        return self.sample(obs)[0]

    def imitation_loss(self, obs: TensorObs, action: torch.Tensor, kind: str) -> tuple[torch.Tensor, dict[str, float]]:
        """BC objective: 'mse' between tanh(mean) and the action, or 'nll' = -log-prob of the action."""
        mean, log_std = self.dist_params(obs)
        mse = (torch.tanh(mean) - action).pow(2).sum(-1).mean()
        if kind == "mse":
            return mse, {"bc_mse": float(mse.detach())}
        nll = -tanh_gaussian_log_prob(action, mean, log_std).mean()
        return nll, {"bc_mse": float(mse.detach()), "bc_nll": float(nll.detach())}
