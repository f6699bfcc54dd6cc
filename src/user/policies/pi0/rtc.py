"""Real-time chunking (Black, Galliker, Levine 2025, arXiv 2506.07339): a new chunk that continues the old one.

While a chunk is computed the robot goes on executing the previous one, `delay` (d) control periods of it. The new
chunk is sampled by the model's Euler steps, each step's velocity corrected (ΠGDM guidance) so that the clean
chunk the step predicts, Â = x_t - t v (π0's convention, see `flow`), is pulled toward the previous chunk's
remaining actions Y: by the vector-Jacobian product of W (Y - Â) through Â with respect to x_t, scaled by a
weight of the flow time clipped at `max_guidance` (β). The soft mask W (`soft_mask`) is 1 over the d actions
executed meanwhile, decays over the overlap after them and is 0 over the last `execute_horizon` (s) actions,
which no earlier chunk proposed. Only the suffix pass is differentiated: the prefix is cached without grad
(`Pi0Model.cached_velocity`). Follows the reference implementation's `get_prefix_weights` and
`realtime_action` (Physical-Intelligence/real-time-chunking-kinetix `src/model.py`), with time flipped to π0's.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from user.config import ConfigError, setting
from user.policies.pi0 import flow
from user.policies.pi0.errors import Pi0Error
from user.policies.pi0.model import Pi0Model, Pi0Observation

Schedule = Literal["exp", "linear", "ones", "zeros"]
SCHEDULES: tuple[Schedule, ...] = ("exp", "linear", "ones", "zeros")


@dataclass(frozen=True)
class RtcConfig:
    """How a new chunk is made continuous with the actions still executed from the previous one."""

    execute_horizon: int = setting(
        25,
        "s: actions of each chunk the robot executes before the next one takes over; the last s actions of the "
        "new chunk get no guidance (nothing earlier proposed them). At most the model's chunk_size",
        min=1,
    )
    max_guidance: float = setting(
        5.0, "β: the guidance weight is clipped at this (the paper uses 5); 0 turns guidance off", min=0.0
    )
    schedule: Schedule = setting(
        "exp",
        "soft mask over the overlap after the delay: exp (the paper's), linear, ones (guide the whole overlap fully) "
        "or zeros (guide the delayed actions only: hard inpainting)",
        choices=SCHEDULES,
    )

    def __post_init__(self) -> None:
        if self.execute_horizon < 1:
            raise ConfigError(f"execute_horizon must be 1 or more, got {self.execute_horizon}")
        if not math.isfinite(self.max_guidance) or self.max_guidance < 0:
            raise ConfigError(f"max_guidance must be a finite number >= 0, got {self.max_guidance}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule {self.schedule!r} is not one of {', '.join(SCHEDULES)}")


def soft_mask(delay: int, execute_horizon: int, chunk_size: int, schedule: Schedule = "exp") -> torch.Tensor:
    """(H,) float32 guidance weights W: 1 for i < d, decaying (by `schedule`) for d <= i < H - s, 0 from H - s on.

    On the decaying part c_i = (H - s - i) / (H - s - d + 1); linear is c_i, exp is c_i (e^c_i - 1) / (e - 1)."""
    if chunk_size < 1:
        raise Pi0Error(f"the chunk must hold one action at least, got chunk_size {chunk_size}")
    if not 0 <= execute_horizon <= chunk_size:
        raise Pi0Error(f"execute_horizon {execute_horizon} must lie in [0, chunk_size {chunk_size}]")
    end = chunk_size - execute_horizon
    if isinstance(delay, bool) or not isinstance(delay, numbers.Integral) or not 0 <= delay <= end:
        raise Pi0Error(
            f"inference delay {delay!r} must be a whole number of control periods in [0, chunk_size - "
            f"execute_horizon = {end}]: the actions executed meanwhile must come from the previous chunk"
        )
    if schedule not in SCHEDULES:
        raise Pi0Error(f"soft mask schedule {schedule!r} is not one of {', '.join(SCHEDULES)}")
    i = torch.arange(chunk_size, dtype=torch.float64)
    if schedule == "ones":
        w = torch.ones(chunk_size, dtype=torch.float64)
    elif schedule == "zeros":
        w = (i < delay).to(torch.float64)
    else:
        w = ((end - i) / (end - delay + 1)).clamp(0.0, 1.0)
        if schedule == "exp":
            w = w * torch.expm1(w) / (math.e - 1)
        w = torch.where(i < delay, 1.0, w)
    return torch.where(i >= end, 0.0, w).to(torch.float32)


def guidance_weight(t: torch.Tensor, max_guidance: float) -> torch.Tensor:
    """(B,) ΠGDM weights at π0 flow times t (1 = noise): min(β, (1 - τ) / (τ r²)) with τ = 1 - t the paper's time
    (0 = noise) and r² = (1 - τ)² / (τ² + (1 - τ)²), that is min(β, (t² + τ²) / (t τ)); the second is infinite at
    pure noise and smallest, 2, at t = 1/2."""
    t64 = t.double()
    tau = 1.0 - t64
    raw = (t64.square() + tau.square()) / (t64 * tau)  # +inf at t = 1 and t = 0, clipped to β
    return raw.clamp(max=max_guidance).to(torch.float32)


@torch.no_grad()
def sample_continuing(
    model: Pi0Model,
    obs: Pi0Observation,
    previous: torch.Tensor | None,
    delay: int,
    config: RtcConfig,
    *,
    noise: torch.Tensor | None = None,
    steps: int | None = None,
) -> torch.Tensor:
    """(B, H, A) chunk continuing `previous`: the (B, H', A) actions of the previous chunk not yet executed, index 0
    being the step the new chunk starts at (H' <= H; steps past H' have no target). `delay` d of them are executed
    while this runs. With nothing to continue (no previous chunk: the first of an episode; a mask of zeros; guidance
    off) this is `model.sample_chunk`, the same noise giving the same chunk."""
    cfg = model.config
    horizon, action_dim = cfg.chunk_size, cfg.action_dim
    if config.execute_horizon > horizon:
        raise Pi0Error(f"execute_horizon {config.execute_horizon} exceeds the model's chunk of {horizon} actions")
    weights = soft_mask(delay, config.execute_horizon, horizon, config.schedule)
    if previous is not None:
        _check_previous(previous, delay, horizon, action_dim)
        weights[previous.shape[1] :] = 0.0
    if previous is None or config.max_guidance == 0 or not bool(weights.any()):
        return model.sample_chunk(obs, noise=noise, steps=steps)
    remaining = previous.shape[1]
    velocity = model.cached_velocity(obs)
    batch, device = int(obs.state.shape[0]), obs.state.device
    if previous.shape[0] != batch:
        raise Pi0Error(f"previous chunk has batch {previous.shape[0]}, the observation {batch}")
    shape = (batch, horizon, action_dim)
    noise = torch.randn(shape, device=device) if noise is None else noise
    if tuple(noise.shape) != shape:
        raise Pi0Error(f"noise must be {shape}, got {tuple(noise.shape)}")
    target = torch.zeros(shape, dtype=torch.float32, device=device)
    target[:, :remaining] = previous.to(device=device, dtype=torch.float32)
    guided = _guided(velocity, target, weights.to(device)[None, :, None], config.max_guidance)
    return flow.euler(guided, noise.float(), steps or cfg.denoise_steps)


def _guided(
    velocity: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    target: torch.Tensor,
    weights: torch.Tensor,
    max_guidance: float,
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The velocity field with ΠGDM guidance toward `target` (B, H, A), masked by `weights` (1, H, 1)."""

    def step(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            x_t = x.detach().requires_grad_(True)
            v = velocity(x_t, t)
            denoised = x_t - t[:, None, None] * v  # Â: the clean chunk this step predicts
            error = ((target - denoised) * weights).detach()
            (correction,) = torch.autograd.grad(denoised, x_t, grad_outputs=error)
        # dt < 0 in π0's time: subtracting the correction moves Â toward the target
        return (v - guidance_weight(t, max_guidance)[:, None, None] * correction).detach()

    return step


def _check_previous(previous: torch.Tensor, delay: int, horizon: int, action_dim: int) -> None:
    """The previous chunk's remaining actions: (B, H', A) with d <= H' <= H, every value finite."""
    if previous.dim() != 3 or previous.shape[2] != action_dim:
        raise Pi0Error(f"previous chunk must be (B, H', {action_dim}), got {tuple(previous.shape)}")
    remaining = previous.shape[1]
    if remaining > horizon:
        raise Pi0Error(f"previous chunk has {remaining} remaining actions, more than the chunk of {horizon}")
    if remaining < delay:
        raise Pi0Error(
            f"previous chunk has {remaining} remaining actions but {delay} are executed during the delay: "
            "the robot would run out of actions"
        )
    if not previous.is_floating_point() or not bool(torch.isfinite(previous).all()):
        raise Pi0Error("previous chunk holds non-finite values (NaN or inf) or is not a float tensor")
