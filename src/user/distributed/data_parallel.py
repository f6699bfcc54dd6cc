"""Data parallelism in one place: gradients averaged over the ranks before every optimizer step, statistics averaged
for the record, weights made identical at the start.

Each rank computes the loss of its share of the global batch (the mean over its rows); the mean of the ranks'
gradients is then the gradient of the mean loss over the whole batch, as one process would compute it. The
averaging is DDP's (one all_reduce over flat buffers of every gradient, per dtype and device) but applied at the
optimizer step instead of in backward hooks: SAC's critic takes part in two losses (the critic's, and the actor's
with its encoder frozen) of which only the first steps it, which DDP's hooks cannot tell apart.

A sharded actor's parameters (DTensors, `user.distributed.sharding`) are left alone: FSDP2 already reduce-scattered
and averaged their gradients in backward.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from user.distributed.group import RankGroup


class DataParallel:
    """The collective operations that make one update out of every rank's share."""

    def __init__(self, group: RankGroup) -> None:
        self.group = group

    @property
    def world_size(self) -> int:
        return self.group.env.world_size

    @property
    def rank(self) -> int:
        return self.group.env.rank

    def total(self, count: int) -> int:
        """The sum of `count` over the ranks."""
        packed = torch.tensor([count], dtype=torch.int64, device=self.group.device)
        dist.all_reduce(packed)
        return int(packed.item())

    def average_gradients(self, params: Iterable[torch.Tensor]) -> None:
        """Every parameter's gradient replaced by its mean over the ranks (a parameter with no gradient on this rank
        counts as a zero one, so every rank sends the same buffers). Sharded parameters are skipped: FSDP2
        averaged theirs in backward."""
        buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = defaultdict(list)
        for p in params:
            if not p.requires_grad or isinstance(p, DTensor):
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            buckets[(p.grad.dtype, p.grad.device)].append(p.grad)
        for (_dtype, device), grads in sorted(buckets.items(), key=lambda kv: str(kv[0])):
            flat = torch.cat([g.reshape(-1) for g in grads]).to(self.group.device)
            dist.all_reduce(flat)
            flat.div_(self.world_size)
            offset = 0
            for g in grads:
                n = g.numel()
                g.copy_(flat[offset : offset + n].view_as(g).to(device))
                offset += n

    def mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """Each value averaged over the ranks (every rank passes the same keys)."""
        names = sorted(values)
        packed = torch.tensor([float(values[k]) for k in names], dtype=torch.float64, device=self.group.device)
        dist.all_reduce(packed)
        return {k: float(v) / self.world_size for k, v in zip(names, packed.tolist(), strict=True)}

    def same_start(self, tensors: Iterable[torch.Tensor]) -> None:
        """Every rank's `tensors` (weights, buffers) set to the lead's, so the ranks start as one model."""
        for t in tensors:
            wire = t.detach().to(self.group.device)
            dist.broadcast(wire, src=self.group.lead)
            with torch.no_grad():
                t.copy_(wire)
