"""DrQ image augmentation: random shifts by up to `pad` pixels (replicate padding, then a random crop back)."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from user.policies.base import TensorObs
from user.policies.draws import Draws


def _draws(source: Draws | torch.Generator | None) -> Draws:
    return source if isinstance(source, Draws) else Draws(source)


def random_shift(images: torch.Tensor, pad: int, draws: Draws | torch.Generator | None = None) -> torch.Tensor:
    """(B, C, H, W) -> same shape, each image shifted by an independent integer offset in [-pad, pad]^2, drawn
    row by row (`Draws`: a generator, or one shared by a learner's ranks)."""
    assert images.dim() == 4, images.shape
    if pad <= 0:
        return images
    b, _, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
    # Offsets are drawn on the host (where a seeded generator lives), then moved to the images' device.
    rng = _draws(draws)
    host = torch.device("cpu")
    dx = rng.integers(0, 2 * pad + 1, (b,), host).to(images.device)
    dy = rng.integers(0, 2 * pad + 1, (b,), host).to(images.device)
    rows = (dy.view(b, 1) + torch.arange(h, device=images.device).view(1, h)).view(b, 1, h, 1)
    cols = (dx.view(b, 1) + torch.arange(w, device=images.device).view(1, w)).view(b, 1, 1, w)
    batch = torch.arange(b, device=images.device).view(b, 1, 1, 1)
    out = padded.permute(0, 2, 3, 1)[batch, rows, cols].squeeze(1)  # (B, H, W, C)
    shifted = out.permute(0, 3, 1, 2).contiguous()
    assert shifted.shape == images.shape, (shifted.shape, images.shape)
    return shifted


def augment_obs(obs: TensorObs, pad: int, draws: Draws | torch.Generator | None = None) -> TensorObs:
    """`obs` with every camera's images randomly shifted (the state is left alone)."""
    if not obs.images or pad <= 0:
        return obs
    rng = _draws(draws)
    return obs.with_images({k: random_shift(v, pad, rng) for k, v in obs.images.items()})
