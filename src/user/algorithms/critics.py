"""Q-function ensembles computed as ONE batched matmul per layer (weights shaped (N, in, out)).

Running N critics as `torch.baddbmm` over stacked weights is much faster than a Python list of MLPs on a
GPU (one kernel per layer instead of N). Each member has its own weights and its own LayerNorm affine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.policies.base import TensorObs


class EnsembleLinear(nn.Module):
    """N independent linear layers: (N, B, in) -> (N, B, out), initialised like `nn.Linear`."""

    def __init__(self, members: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 3 and x.shape[0] == self.weight.shape[0], x.shape
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm over the last axis with a separate scale and shift per ensemble member."""

    def __init__(self, members: int, features: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(members, 1, features))
        self.bias = nn.Parameter(torch.zeros(members, 1, features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], eps=self.eps) * self.weight + self.bias


class EnsembleQ(nn.Module):
    """Q(s, a) for N members sharing one observation encoder: (TensorObs, (B, A)) -> (N, B)."""

    def __init__(
        self,
        encoder: nn.Module,
        feature_dim: int,
        action_dim: int,
        members: int,
        hidden: Sequence[int],
        *,
        layer_norm: bool,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.members = members
        layers: list[nn.Module] = []
        width = feature_dim + action_dim
        for h in hidden:
            layers.append(EnsembleLinear(members, width, h))
            if layer_norm:
                layers.append(EnsembleLayerNorm(members, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(EnsembleLinear(members, width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: TensorObs, action: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
        """Q values (N, B); pass `features` to reuse an encoder output (e.g. computed without gradient)."""
        feats = self.encoder(obs) if features is None else features
        x = torch.cat([feats, action], dim=-1)
        q: torch.Tensor = self.net(x.unsqueeze(0).expand(self.members, *x.shape)).squeeze(-1)
        assert q.shape == (self.members, x.shape[0]), q.shape
        return q
