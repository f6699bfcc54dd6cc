"""Small fixed batches for algorithm tests, and an algorithm's state through a file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from user.algorithms.base import Algorithm, TorchBatch
from user.algorithms.sac import SAC
from user.buffer.batch import TransitionBatch


def fixed_batch(
    n: int = 64,
    state_dim: int = 3,
    action_dim: int = 2,
    seed: int = 0,
    images: dict[str, tuple[int, int]] | None = None,
) -> TransitionBatch:
    """A reproducible random batch; `images` maps camera -> (H, W) for uint8 RGB images."""
    rng = np.random.default_rng(seed)
    pixels = {c: rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8) for c, (h, w) in (images or {}).items()}
    next_pixels = {c: rng.integers(0, 256, (n, h, w, 3), dtype=np.uint8) for c, (h, w) in (images or {}).items()}
    return TransitionBatch(
        indices=np.arange(n, dtype=np.int64),
        state=rng.normal(size=(n, state_dim)).astype(np.float32),
        action=rng.uniform(-0.9, 0.9, (n, action_dim)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_state=rng.normal(size=(n, state_dim)).astype(np.float32),
        terminated=rng.random(n) < 0.1,
        truncated=np.zeros(n, bool),
        success=np.zeros(n, bool),
        is_demo=np.arange(n) % 2 == 0,
        intervened=np.arange(n) % 3 == 0,
        policy_version=np.zeros(n, np.int64),
        images=pixels,
        next_images=next_pixels,
    )


def spy_critic_steps(sac: SAC) -> list[TorchBatch]:
    """Record the batch of every critic step `sac` (or an RLPD) takes from now on."""
    seen: list[TorchBatch] = []
    step = sac.critic_step

    def spy(batch: TorchBatch) -> tuple[torch.Tensor, dict[str, float]]:
        seen.append(batch)
        return step(batch)

    sac.critic_step = spy  # type: ignore[method-assign]
    return seen


def through_file(source: Algorithm, target: Algorithm, path: Path) -> None:
    """Restore `target` from `source`'s state written to `path` and read back onto the host with plain tensors and
    values only (`weights_only`), as a learner checkpoint holds it."""
    torch.save(source.state_dict(), path)
    target.load_state_dict(torch.load(path, weights_only=True, map_location="cpu"))
