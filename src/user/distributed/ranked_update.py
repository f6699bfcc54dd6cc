"""`RankedUpdate`: one algorithm update made by every rank together, each on its share of the lead's global batch.

The lead orders the global batch as one process would train it (the algorithm's `row_order`, e.g. RLPD's shuffle)
and then so that each of the update's consecutive slices (`row_chunks`: one per gradient step when UTD > 1) is
split evenly over the ranks: rank r's share is the r-th part of every slice, in slice order. Every rank then runs
the algorithm's own update on its share (`join_ranks`: gradients averaged at each optimizer step, each row's random
draws as one process makes them), and the statistics are averaged. Started once, the ranks' weights are made the
lead's, so they begin as one model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

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
        self.parallel.same_start(_float_tensors(algorithm.state_dict()))

    def update(self, batch: TransitionBatch | None) -> TrainingStats:
        """One update: the lead passes the global batch it sampled, every other rank None (a collective)."""
        if batch is not None:
            order = self.algorithm.row_order(len(batch))
            ordered = batch if order is None else batch.take(order)
            batch = ordered.take(share_order(len(ordered), self.algorithm.row_chunks, self.group.env.world_size))
        share = share_batch(self.group, batch)
        stats = self.algorithm.update_tensors(self.algorithm.prepare(share))  # type: ignore[attr-defined]
        return TrainingStats(stats.updates, self._mean(stats.losses), self._mean(stats.info))

    def _mean(self, values: Mapping[str, float]) -> dict[str, float]:
        return self.parallel.mean(values) if values else {}


def _float_tensors(state: Mapping[str, Any]) -> Iterator[torch.Tensor]:
    """The floating-point tensors of a state dict (module weights are views of the parameters)."""
    for value in state.values():
        if isinstance(value, Mapping):
            yield from _float_tensors(value)
        elif isinstance(value, torch.Tensor) and value.is_floating_point():
            yield value
