"""`FlowPolicy`: a flow-matching policy. A velocity network v(x_t, t, obs) carries Gaussian noise x_0 to an action
in K Euler steps, x_{k+1} = x_k + v(x_k, t_k, obs) / K with t_k = k / K, then tanh (or clip) maps x_K into [-1, 1].

For SAC-Flow the rollout is noise-augmented: each step adds sigma_k(x_k, t_k, obs) * eps_k, so every step is a
Gaussian N(x_k + v_k / K, sigma_k^2) and the log-likelihood of the sampled path is the sum of the K per-step
Gaussian log-densities (minus the tanh correction). The start x_0 ~ N(0, I) has no parameters and is left out.
Behaviour cloning uses the flow-matching loss on straight paths x_t = (1 - t) x_0 + t x_1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from user.config import setting
from user.policies.base import Encoder, Policy, TensorObs
from user.policies.cnn import decode_batch
from user.policies.draws import Draws
from user.policies.gaussian import gaussian_log_prob, mlp, tanh_log_det
from user.policies.mlp import StateEncoder
from user.policies.preprocess import ObservationConfig, normalise_state, preprocess
from user.policies.resnet import ImageEncoderConfig, ImageStateEncoder

ACTION_EPS = 1e-3  # actions are clamped to +-(1 - ACTION_EPS) before atanh in the BC target


@dataclass(frozen=True)
class FlowPolicyConfig:
    """A flow-matching policy on the state (and camera images when observation.cameras is set)."""

    state_dim: int = setting(3, "length of the state vector", min=0)
    action_dim: int = setting(1, "length of the action vector (actions are in [-1, 1])", min=1)
    observation: ObservationConfig = setting(
        ObservationConfig(image_size=None), "state normalisation; cameras () = state only"
    )
    encoder: ImageEncoderConfig = setting(ImageEncoderConfig(), "image encoder, used when cameras are set")
    hidden: tuple[int, ...] = setting((256, 256), "widths of the velocity network's hidden layers")
    layer_norm: bool = setting(True, "LayerNorm after each hidden linear layer")
    steps: int = setting(4, "Euler steps from noise to action (K)", min=1)
    time_frequencies: int = setting(4, "sin/cos pairs of the time embedding", min=0)
    squash: str = setting("tanh", "map from x_K to [-1, 1]: tanh or clip", choices=("tanh", "clip"))
    noise_log_std_min: float = setting(-5.0, "lower bound of each step's injected-noise log std")
    noise_log_std_max: float = setting(0.0, "upper bound of each step's injected-noise log std")
    seed: int = setting(0, "seed of the parameter initialisation")

    def __post_init__(self) -> None:
        if self.noise_log_std_min > self.noise_log_std_max:
            raise ValueError("noise_log_std_min must not exceed noise_log_std_max")
        if self.observation.cameras and self.observation.image_size is None:
            raise ValueError("a flow policy on images needs observation.image_size")


# ---- the maths, as small functions -------------------------------------------------------------------


def time_embedding(t: torch.Tensor, frequencies: int) -> torch.Tensor:
    """(B,) times in [0, 1] -> (B, 1 + 2 F): [t, sin(2^f pi t), cos(2^f pi t) for f < F]."""
    assert t.dim() == 1, t.shape
    scales = (2.0 ** torch.arange(frequencies, dtype=t.dtype, device=t.device)) * math.pi
    angles = t.unsqueeze(-1) * scales
    return torch.cat([t.unsqueeze(-1), angles.sin(), angles.cos()], dim=-1)


def interpolate(x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Points x_t = (1 - t) x_0 + t x_1 on the straight path; x (B, A), t (B,)."""
    return (1.0 - t).unsqueeze(-1) * x0 + t.unsqueeze(-1) * x1


def flow_matching_loss(
    velocity: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """mean_B sum_A (v(x_t, t) - (x_1 - x_0))^2: regress the velocity onto the straight path's."""
    assert velocity.shape == x0.shape == x1.shape and velocity.dim() == 2, (velocity.shape, x0.shape, x1.shape)
    loss = (velocity - (x1 - x0)).pow(2).sum(-1).mean()
    return loss, {"flow_mse": float(loss.detach())}


def path_log_prob(
    xs: list[torch.Tensor], means: list[torch.Tensor], log_stds: list[torch.Tensor], squash: str
) -> torch.Tensor:
    """sum_k log N(x_{k+1}; mean_k, exp(log_std_k)) - [tanh correction at x_K]; xs has K + 1 entries -> (B,)."""
    assert len(xs) == len(means) + 1 == len(log_stds) + 1, (len(xs), len(means), len(log_stds))
    total = sum(
        (gaussian_log_prob(x, m, s) for x, m, s in zip(xs[1:], means, log_stds, strict=True)),
        start=torch.zeros(xs[0].shape[0], dtype=xs[0].dtype, device=xs[0].device),
    )
    return total - tanh_log_det(xs[-1]) if squash == "tanh" else total


def squash_action(u: torch.Tensor, squash: str) -> torch.Tensor:
    return torch.tanh(u) if squash == "tanh" else u.clamp(-1.0, 1.0)


def unsquash_action(action: torch.Tensor, squash: str) -> torch.Tensor:
    """The flow's target x_1 for a demonstrated action: atanh of the (clamped) action, or the action itself."""
    return torch.atanh(action.clamp(-1.0 + ACTION_EPS, 1.0 - ACTION_EPS)) if squash == "tanh" else action


# ---- the networks ------------------------------------------------------------------------------------


class VelocityNet(nn.Module):
    """(features (B, F), x (B, A), t (B,)) -> velocity (B, A), injected-noise log std (B, A)."""

    def __init__(self, features: int, cfg: FlowPolicyConfig) -> None:
        super().__init__()
        width_in = features + cfg.action_dim + 1 + 2 * cfg.time_frequencies
        self.trunk = mlp((width_in, *cfg.hidden), layer_norm=cfg.layer_norm)
        self.out = nn.Linear(cfg.hidden[-1] if cfg.hidden else width_in, 2 * cfg.action_dim)
        self.frequencies = cfg.time_frequencies
        self.log_std_min, self.log_std_max = cfg.noise_log_std_min, cfg.noise_log_std_max

    def forward(self, features: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(torch.cat([features, x, time_embedding(t, self.frequencies)], dim=-1))
        velocity, raw = self.out(h).chunk(2, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw) + 1.0)
        return velocity, log_std


class FlowActor(nn.Module):
    """Observation encoder + velocity network."""

    def __init__(self, encoder: Encoder, velocity: VelocityNet) -> None:
        super().__init__()
        self.encoder, self.velocity = encoder, velocity


def make_flow_encoder(cfg: FlowPolicyConfig) -> Encoder:
    obs = cfg.observation
    if not obs.cameras:
        return StateEncoder(cfg.state_dim)
    assert obs.image_size is not None
    return ImageStateEncoder(cfg.encoder, obs.cameras, (obs.image_size, obs.image_size), cfg.state_dim)


class FlowPolicy(Policy):
    """Flow-matching policy; `sample` gives reparameterised actions with their noisy-path log-likelihood."""

    actor: FlowActor

    def __init__(self, config: FlowPolicyConfig) -> None:
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            encoder = make_flow_encoder(config)
            actor = FlowActor(encoder, VelocityNet(encoder.out_features, config))
        super().__init__(actor, config.action_dim)

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.config.observation.cameras)

    def preprocess(self, state: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> TensorObs:
        cameras = self.config.observation.cameras
        if not cameras:
            return TensorObs(normalise_state(state, self.config.observation))
        pixels = {c: decode_batch(images[c], c) for c in cameras if c in images}
        return preprocess(state, pixels, self.config.observation, self.device)

    def encoder(self) -> Encoder:
        """A fresh encoder of this policy's kind, for a critic."""
        return make_flow_encoder(self.config)

    def rollout(
        self, obs: TensorObs, x0: torch.Tensor, *, noise: bool
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """The K-step Euler path from x0 (B, A): points x_0..x_K, step means and step noise log stds."""
        b, k = len(obs), self.config.steps
        assert x0.shape == (b, self.action_dim), x0.shape
        features = self.actor.encoder(obs)
        xs, means, log_stds = [x0], [], []
        for step in range(k):
            t = torch.full((b,), step / k, dtype=x0.dtype, device=x0.device)
            velocity, log_std = self.actor.velocity(features, xs[-1], t)
            mean = xs[-1] + velocity / k
            xs.append(mean + log_std.exp() * self.draws.normal_like(mean) if noise else mean)
            means.append(mean)
            log_stds.append(log_std)
        return xs, means, log_stds

    def sample(self, obs: TensorObs) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions (B, A) from the noise-augmented flow and their path log-likelihoods (B,)."""
        x0 = self.draws.normal((len(obs), self.action_dim), obs.state.dtype, obs.state.device)
        xs, means, log_stds = self.rollout(obs, x0, noise=True)
        return squash_action(xs[-1], self.config.squash), path_log_prob(xs, means, log_stds, self.config.squash)

    def act_tensor(self, obs: TensorObs, *, deterministic: bool) -> torch.Tensor:
        """Deterministic: the noise-free flow from x_0 = 0; else the noisy flow SAC-Flow trains."""
        if not deterministic:
            return self.sample(obs)[0]
        x0 = torch.zeros(len(obs), self.action_dim, device=obs.state.device)
        return squash_action(self.rollout(obs, x0, noise=False)[0][-1], self.config.squash)

    def imitation_loss(
        self, obs: TensorObs, action: torch.Tensor, draws: Draws | None = None, rows: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Flow-matching BC on `rows` (a boolean mask; every row by default): x_0 ~ N(0, I), t ~ U[0, 1), regress
        v(x_t, t, obs) onto x_1 - x_0. The draws are made for every row of the batch (`draws`: a row's numbers do not
        depend on how many ranks share the batch, nor on which other rows are selected)."""
        b = len(obs)
        assert action.shape == (b, self.action_dim), action.shape
        draws = draws or Draws()
        x1 = unsquash_action(action, self.config.squash)
        x0 = draws.normal(tuple(x1.shape), x1.dtype, x1.device)
        t = draws.uniform((b,), x1.dtype, x1.device)
        if rows is not None:
            obs = TensorObs(obs.state[rows], {k: v[rows] for k, v in obs.images.items()})
            x0, x1, t = x0[rows], x1[rows], t[rows]
        velocity, _ = self.actor.velocity(self.actor.encoder(obs), interpolate(x0, x1, t), t)
        return flow_matching_loss(velocity, x0, x1)
