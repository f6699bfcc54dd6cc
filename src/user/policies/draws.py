"""`Draws`: where the random numbers of a batch's rows come from (a policy's sampling noise, an algorithm's
augmentation shifts and flow-matching times), the same for each row whatever the number of ranks sharing the batch.

By default (`Draws()`) they come from torch's global generator on the tensors' device, as `torch.randn_like` would.
A learner whose ranks each hold a share of one global batch gives every rank `Draws(generator, world, rank)` with
generators seeded alike: each draw of n rows is then made for all n x world rows of the global batch and this
rank's block (rows rank x n .. (rank + 1) x n - 1) is kept, so every row gets the number it would get in one
process drawing for the whole batch, and the generators of all ranks stay in step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class DrawsError(ValueError):
    """Draws asked for in a way that cannot keep rows alike across ranks."""


class Draws:
    """Random numbers by row: torch's global generator (default), or a seeded one shared by `world` ranks."""

    def __init__(self, generator: torch.Generator | None = None, world: int = 1, rank: int = 0) -> None:
        if world > 1 and generator is None:
            raise DrawsError("draws shared by several ranks need a generator seeded alike on each of them")
        if not 0 <= rank < world:
            raise DrawsError(f"rank {rank} is not one of {world} ranks")
        self.generator = generator
        self.world = world
        self.rank = rank

    def normal_like(self, like: torch.Tensor) -> torch.Tensor:
        """Standard normal numbers of `like`'s shape, dtype and device (rows along the first axis)."""
        return self.normal(tuple(like.shape), like.dtype, like.device)

    def normal(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return self._rows(lambda s, **kw: torch.randn(s, dtype=dtype, **kw), shape, device)

    def uniform(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Uniform numbers in [0, 1)."""
        return self._rows(lambda s, **kw: torch.rand(s, dtype=dtype, **kw), shape, device)

    def integers(self, low: int, high: int, shape: Sequence[int], device: torch.device) -> torch.Tensor:
        """Integers in [low, high)."""
        return self._rows(lambda s, **kw: torch.randint(low, high, s, **kw), shape, device)

    def _rows(self, draw: Callable[..., torch.Tensor], shape: Sequence[int], device: torch.device) -> torch.Tensor:
        if self.generator is None:
            return draw(tuple(shape), device=device)
        rows = int(shape[0])
        everyone = draw((rows * self.world, *shape[1:]), generator=self.generator)  # on the generator's host
        return everyone[self.rank * rows : (self.rank + 1) * rows].to(device)
