"""Flow matching on action chunks, in π0's convention.

Time runs from data (t = 0) to noise (t = 1): x_t = t * noise + (1 - t) * actions, and the network predicts the
velocity u = noise - actions (dx/dt). Training draws t from Beta(1.5, 1) scaled into [0.001, 1]; sampling starts
from noise at t = 1 and takes K Euler steps of dt = -1/K down to t = 0 (openpi `models_pytorch/pi0_pytorch.py`
sample_time, forward, sample_actions). Time enters the network through a sine-cosine embedding with periods
from 4e-3 to 4 (create_sinusoidal_pos_embedding there).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from user.policies.pi0.errors import Pi0Error

T_MIN = 0.001  # the smallest training time (openpi: Beta sample * 0.999 + 0.001)


def time_embedding(t: torch.Tensor, dim: int, min_period: float, max_period: float) -> torch.Tensor:
    """(B,) times -> (B, dim) float32 [sin | cos] of 2π t / period, periods geometric from min to max."""
    if t.dim() != 1:
        raise Pi0Error(f"flow times must be (B,), got {tuple(t.shape)}")
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64, device=t.device)
    period = min_period * (max_period / min_period) ** fraction
    angle = (2 * math.pi / period)[None, :] * t.to(torch.float64)[:, None]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).to(torch.float32)


def sample_time(batch: int, beta: tuple[float, float], device: torch.device) -> torch.Tensor:
    """(B,) training times: Beta(a, b) scaled into [T_MIN, 1] (more weight near the noisy end for a > b)."""
    draw = torch.distributions.Beta(torch.tensor(beta[0]), torch.tensor(beta[1])).sample((batch,))
    return (draw * (1.0 - T_MIN) + T_MIN).to(device=device, dtype=torch.float32)


def interpolate(actions: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(noisy chunk x_t, target velocity u) for (B, H, A) actions and noise at (B,) times."""
    tt = t[:, None, None]
    return tt * noise + (1.0 - tt) * actions, noise - actions


def masked_mse(velocity: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the (B, H) steps where mask is True (every action dimension counted)."""
    if not bool(mask.any()):
        raise Pi0Error("the chunk mask marks no step as valid: nothing to learn from")
    weight = mask.to(velocity.dtype)[..., None]
    return ((velocity - target).square() * weight).sum() / (weight.sum() * velocity.shape[-1])


def euler(
    velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], noise: torch.Tensor, steps: int
) -> torch.Tensor:
    """Integrate dx/dt = velocity(x, t) from x = noise at t = 1 to t = 0 in `steps` equal Euler steps."""
    if steps < 1:
        raise Pi0Error(f"denoising needs one step at least, got {steps}")
    dt = -1.0 / steps
    x = noise
    for i in range(steps):
        t = torch.full((noise.shape[0],), 1.0 + i * dt, dtype=torch.float32, device=noise.device)
        x = x + dt * velocity(x, t)
    return x
