"""`RankedUpdate`: one algorithm update made by every rank together, each on its share of the lead's global batch.

The lead orders the global batch as one process would train it (the algorithm's `row_order`, e.g. RLPD's shuffle)
and then so that each of the update's consecutive slices (`row_chunks`: one per gradient step when UTD > 1) is
split evenly over the ranks: rank r's share is the r-th part of every slice, in slice order. Every rank then runs
the algorithm's own update on its share (`join_ranks`: gradients averaged at each optimizer step, each row's random
draws as one process makes them), and the statistics are averaged. When it starts, every rank takes the lead's
whole training state, so they begin as one model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist

from user.algorithms.base import Algorithm, TrainingStats
from user.buffer.batch import TransitionBatch
from user.distributed.batch_share import share_batch
from user.distributed.data_parallel import DataParallel
from user.distributed.group import RankError, RankGroup


def share_order(rows: int, chunks: int, world: int) -> npt.NDArray[np.int64]:
    """The order of a batch's rows whose contiguous blocks, one per rank, hold the r-th part of every slice."""
    if rows % (chunks * world):
        raise RankError(f"a batch of {rows} rows does not split into {chunks} slices over {world} ranks evenly")
    part = rows // (chunks * world)
    order = [c * part * world + r * part + j for r in range(world) for c in range(chunks) for j in range(part)]
    return np.asarray(order, dtype=np.int64)


class RankedUpdate:
    """An algorithm trained data-parallel over `group`."""

    def __init__(self, algorithm: Algorithm, group: RankGroup) -> None:
        self.algorithm = algorithm
        self.group = group
        self.parallel = DataParallel(group)
        algorithm.join_ranks(self.parallel)
        self._take_leads_state()

    def update(self, batch: TransitionBatch | None) -> TrainingStats:
        """One update: the lead passes the global batch it sampled, every other rank None (a collective)."""
        if batch is not None:
            order = self.algorithm.row_order(len(batch))
            ordered = batch if order is None else batch.take(order)
            batch = ordered.take(share_order(len(ordered), self.algorithm.row_chunks, self.group.env.world_size))
        share = share_batch(self.group, batch)
        stats = self.algorithm.update_tensors(self.algorithm.prepare(share))  # type: ignore[attr-defined]
        return TrainingStats(stats.updates, self._mean(stats.losses), self._mean(stats.info))

    def _take_leads_state(self) -> None:
        """Every rank's whole training state (weights, optimizers, counters, generators) made the lead's, e.g. the
        one it resumed from a checkpoint."""
        held: list[Any] = [_on_host(self.algorithm.state_dict()) if self.group.is_lead else None]
        dist.broadcast_object_list(held, src=self.group.lead)
        if not self.group.is_lead:
            self.algorithm.load_state_dict(held[0])

    def _mean(self, values: Mapping[str, float]) -> dict[str, float]:
        return self.parallel.mean(values) if values else {}


def _on_host(value: Any) -> Any:
    """`value` (a state dict) with every tensor copied to the host, so any rank can load it on its own device."""
    if isinstance(value, Mapping):
        return {k: _on_host(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_host(v) for v in value)
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value
