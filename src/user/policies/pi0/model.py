"""The π0-shaped model: prefix (images + instruction) and suffix (state + noisy chunk + time) through the two
decoders, a velocity for every action of the chunk; `chunk_loss` trains it, `sample_chunk` acts with it
(`cached_velocity` is its velocity field, which `rtc` guides).

Module names follow openpi's `PI0Pytorch` (`paligemma_with_expert`, `state_proj`, `action_in_proj`,
`action_out_proj`, `action_time_mlp_in`, `action_time_mlp_out`), so the published checkpoints' tensor names map
onto ours by `names.py`. The suffix is the state token (a block of its own) then the H action tokens (one block):
each action token is the action-in projection of the noisy action, concatenated with the time embedding and
mixed by a two-layer swish MLP (openpi `pi0_pytorch.py` embed_suffix, pi0 variant).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.policies.pi0 import flow, masks
from user.policies.pi0.backbone import PaliGemmaWithExpert
from user.policies.pi0.config import Pi0Config, expert_config, paligemma_config
from user.policies.pi0.errors import Pi0Error

if TYPE_CHECKING:
    from transformers import GemmaConfig, PaliGemmaConfig


class Pi0Observation(NamedTuple):
    """A batch as the model takes it."""

    images: tuple[torch.Tensor, ...]  # one (B, 3, S, S) tensor in [-1, 1] per configured camera, in order
    state: torch.Tensor  # (B, state_dim) float
    tokens: torch.Tensor  # (B, max_tokens) int64 instruction token ids
    token_mask: torch.Tensor  # (B, max_tokens) bool, True for real tokens


class _Tokens(NamedTuple):
    embeddings: torch.Tensor  # (B, T, width)
    pad: torch.Tensor  # (B, T) bool
    starts: torch.Tensor  # (B, T) bool: token opens a new attention block


class Pi0Model(nn.Module):
    """PaliGemma prefix, Gemma action expert, flow matching over chunks of `chunk_size` actions."""

    def __init__(
        self, config: Pi0Config, paligemma: PaliGemmaConfig | None = None, expert: GemmaConfig | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.paligemma_with_expert = PaliGemmaWithExpert(
            paligemma if paligemma is not None else paligemma_config(config),
            expert if expert is not None else expert_config(config),
        )
        width = config.expert.width
        self.state_proj = nn.Linear(config.state_dim, width)
        self.action_in_proj = nn.Linear(config.action_dim, width)
        self.action_out_proj = nn.Linear(width, config.action_dim)
        self.action_time_mlp_in = nn.Linear(2 * width, width)
        self.action_time_mlp_out = nn.Linear(width, width)

    def chunk_loss(
        self,
        obs: Pi0Observation,
        actions: torch.Tensor,
        mask: torch.Tensor,
        *,
        noise: torch.Tensor | None = None,
        time: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Flow-matching loss of (B, H, A) action chunks; steps where the (B, H) mask is False (padding past an
        episode's end) are left out of the attention and of the loss. `noise`/`time` fix the draw (tests)."""
        cfg = self.config
        batch = self._check(obs)
        expected = (batch, cfg.chunk_size, cfg.action_dim)
        if tuple(actions.shape) != expected:
            raise Pi0Error(f"actions must be (B, H, A) = {expected}, got {tuple(actions.shape)}")
        if tuple(mask.shape) != expected[:2] or mask.dtype != torch.bool:
            raise Pi0Error(f"the chunk mask must be bool (B, H) = {expected[:2]}, got {mask.dtype} {tuple(mask.shape)}")
        noise = torch.randn_like(actions) if noise is None else noise
        time = flow.sample_time(batch, cfg.time_beta, actions.device) if time is None else time
        if noise.shape != actions.shape or tuple(time.shape) != (batch,):
            raise Pi0Error(
                f"noise must be {expected} and time ({batch},), got {tuple(noise.shape)}, {tuple(time.shape)}"
            )
        x_t, target = flow.interpolate(actions, noise, time)
        velocity = self.velocity(obs, x_t, time, mask)
        loss = flow.masked_mse(velocity.float(), target.float(), mask)
        return loss, {"flow_mse": float(loss.detach()), "valid_steps": float(mask.sum())}

    def velocity(self, obs: Pi0Observation, x_t: torch.Tensor, t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(B, H, A) velocity of noisy chunks x_t at (B,) times, prefix and suffix in one joint pass."""
        prefix = self._embed_prefix(obs)
        suffix = self._embed_suffix(obs.state, x_t, t, mask)
        pad = torch.cat([prefix.pad, suffix.pad], dim=1)
        allowed = masks.allowed(pad, torch.cat([prefix.starts, suffix.starts], dim=1))
        dtype = prefix.embeddings.dtype
        out = self.paligemma_with_expert(
            prefix.embeddings, suffix.embeddings.to(dtype), masks.additive(allowed, dtype), masks.positions(pad)
        )
        velocity: torch.Tensor = self.action_out_proj(
            out[:, -self.config.chunk_size :].to(self.action_out_proj.weight.dtype)
        )
        return velocity

    @torch.no_grad()
    def sample_chunk(
        self, obs: Pi0Observation, *, noise: torch.Tensor | None = None, steps: int | None = None
    ) -> torch.Tensor:
        """(B, H, A) chunk: K Euler steps from noise, the prefix computed once and cached."""
        cfg = self.config
        batch = self._check(obs)
        shape = (batch, cfg.chunk_size, cfg.action_dim)
        noise = torch.randn(shape, device=obs.state.device) if noise is None else noise
        if tuple(noise.shape) != shape:
            raise Pi0Error(f"noise must be {shape}, got {tuple(noise.shape)}")
        return flow.euler(self.cached_velocity(obs), noise.float(), steps or cfg.denoise_steps)

    def cached_velocity(self, obs: Pi0Observation) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The sampler's velocity field v(x_t, t) -> (B, H, A) float32 of `obs`'s chunks: the prefix is run once
        here, without grad, and its keys and values cached; each call runs the suffix alone, so a guided sampler
        (`rtc`) can differentiate it with respect to x_t and nothing else."""
        cfg = self.config
        batch = self._check(obs)
        with torch.no_grad():
            prefix = self._embed_prefix(obs)
            dtype = prefix.embeddings.dtype
            prefix_allowed = masks.allowed(prefix.pad, prefix.starts)
            cache = self.paligemma_with_expert.cache_prefix(
                prefix.embeddings, masks.additive(prefix_allowed, dtype), masks.positions(prefix.pad)
            )
        every_step = torch.ones(batch, cfg.chunk_size, dtype=torch.bool, device=obs.state.device)
        offset = prefix.pad.sum(dim=1, keepdim=True)

        def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            suffix = self._embed_suffix(obs.state, x, t, every_step)
            own = masks.allowed(suffix.pad, suffix.starts)
            sees_prefix = prefix.pad[:, None, :].expand(batch, own.shape[1], prefix.pad.shape[1])
            mask = masks.additive(torch.cat([sees_prefix, own], dim=2), dtype)
            out = self.paligemma_with_expert.forward_suffix(
                suffix.embeddings.to(dtype), cache, mask, masks.positions(suffix.pad, offset)
            )
            v: torch.Tensor = self.action_out_proj(out[:, -cfg.chunk_size :].to(self.action_out_proj.weight.dtype))
            return v.float()

        return velocity

    def _check(self, obs: Pi0Observation) -> int:
        cfg = self.config
        batch = int(obs.state.shape[0])
        if obs.state.dim() != 2 or obs.state.shape[1] != cfg.state_dim:
            raise Pi0Error(f"state must be (B, {cfg.state_dim}), got {tuple(obs.state.shape)}")
        if len(obs.images) != len(cfg.cameras):
            raise Pi0Error(f"{len(obs.images)} images given, the model looks at {len(cfg.cameras)} {cfg.cameras}")
        side = cfg.vision.image_size
        for camera, image in zip(cfg.cameras, obs.images, strict=True):
            if tuple(image.shape) != (batch, 3, side, side):
                raise Pi0Error(
                    f"camera {camera!r}: image must be ({batch}, 3, {side}, {side}), got {tuple(image.shape)}"
                )
        want = (batch, cfg.max_tokens)
        if tuple(obs.tokens.shape) != want or tuple(obs.token_mask.shape) != want:
            raise Pi0Error(f"tokens and token_mask must be {want}, got {tuple(obs.tokens.shape)}")
        return batch

    def _embed_prefix(self, obs: Pi0Observation) -> _Tokens:
        """Image tokens of every camera then the instruction tokens: one bidirectional block."""
        embs = [self.paligemma_with_expert.embed_image(image) for image in obs.images]
        embs.append(self.paligemma_with_expert.embed_tokens(obs.tokens))
        x = torch.cat(embs, dim=1)
        batch, images = x.shape[0], x.shape[1] - obs.tokens.shape[1]
        pad = torch.cat([torch.ones(batch, images, dtype=torch.bool, device=x.device), obs.token_mask], dim=1)
        return _Tokens(x, pad, torch.zeros_like(pad))

    def _embed_suffix(self, state: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor, valid: torch.Tensor) -> _Tokens:
        """State token (its own block) then one token per action (one block); padded actions are not attended."""
        cfg = self.config
        weight = self.state_proj.weight
        state_tok = self.state_proj(state.to(weight.dtype))[:, None]
        times = flow.time_embedding(t, cfg.expert.width, cfg.min_period, cfg.max_period).to(weight.dtype)
        actions = self.action_in_proj(x_t.to(weight.dtype))
        mixed = torch.cat([actions, times[:, None].expand_as(actions)], dim=2)
        action_toks = self.action_time_mlp_out(F.silu(self.action_time_mlp_in(mixed)))
        batch = state.shape[0]
        ones = torch.ones(batch, 1, dtype=torch.bool, device=state.device)
        starts = torch.zeros(batch, 1 + cfg.chunk_size, dtype=torch.bool, device=state.device)
        starts[:, :2] = True
        return _Tokens(torch.cat([state_tok, action_toks], dim=1), torch.cat([ones, valid], dim=1), starts)
