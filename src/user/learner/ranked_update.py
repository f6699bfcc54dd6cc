"""`RankedUpdate`: one algorithm update made by every rank together, each on its share of the lead's global batch.

The lead orders the global batch as one process would train it (the algorithm's `row_order`, e.g. RLPD's shuffle)
and then so that each of the update's consecutive slices (`row_chunks`: one per gradient step when UTD > 1) is
split evenly over the ranks: rank r's share is the r-th part of every slice, in slice order. Every rank then runs
the algorithm's own update on its share (`join_ranks`: gradients averaged at each optimizer step, each row's random
draws as one process makes them), and the statistics are averaged. When it starts, every rank takes the lead's
whole training state, so they begin as one model; then, when the lead's plan says so (`ranks.shard`, decided on the
lead from its settings and sent with its state), every rank shards the policy's actor alike (FSDP2,
`user.distributed.sharding`), whose full weights `gather` collects again for publication.
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
from user.distributed.commands import LeadChannel, Op
from user.distributed.data_parallel import DataParallel
from user.distributed.group import RankError, RankGroup
from user.distributed.ranks import RanksConfig
from user.distributed.sharding import ShardPlan, apply_sharding, count_params, gather_full, plan_sharding
from user.policies.base import Gather


def share_order(rows: int, chunks: int, world: int) -> npt.NDArray[np.int64]:
    """The order of a batch's rows whose contiguous blocks, one per rank, hold the r-th part of every slice."""
    if rows % (chunks * world):
        raise RankError(f"a batch of {rows} rows does not split into {chunks} slices over {world} ranks evenly")
    part = rows // (chunks * world)
    order = [c * part * world + r * part + j for r in range(world) for c in range(chunks) for j in range(part)]
    return np.asarray(order, dtype=np.int64)


class RankedUpdate:
    """An algorithm trained data-parallel over `group`, its actor sharded when the lead's `ranks` settings say so
    (given on the lead; the other ranks pass None and follow the lead's plan)."""

    def __init__(self, algorithm: Algorithm, group: RankGroup, ranks: RanksConfig | None = None) -> None:
        self.algorithm = algorithm
        self.group = group
        self.parallel = DataParallel(group)
        algorithm.join_ranks(self.parallel)
        self.plan = self._take_leads_state(ranks or RanksConfig())
        if self.plan.shard:
            apply_sharding(algorithm, self.plan, group)

    @property
    def sharded(self) -> bool:
        return self.plan.shard

    def gather(self, into: torch.Tensor | None) -> None:
        """The sharded actor's full weights into `into` on the lead (a collective: the others pass None)."""
        gather_full(self.algorithm.policy.actor, into)

    def update(self, batch: TransitionBatch | None) -> TrainingStats:
        """One update: the lead passes the global batch it sampled, every other rank None (a collective)."""
        if batch is not None:
            order = self.algorithm.row_order(len(batch))
            ordered = batch if order is None else batch.take(order)
            batch = ordered.take(share_order(len(ordered), self.algorithm.row_chunks, self.group.env.world_size))
        share = share_batch(self.group, batch)
        stats = self.algorithm.update_tensors(self.algorithm.prepare(share))  # type: ignore[attr-defined]
        return TrainingStats(stats.updates, self._mean(stats.losses), self._mean(stats.info))

    def _take_leads_state(self, ranks: RanksConfig) -> ShardPlan:
        """Every rank's whole training state (weights, optimizers, counters, generators) made the lead's, e.g. the
        one it resumed from a checkpoint; the lead's shard plan."""
        held: list[Any] = [None, None]
        if self.group.is_lead:
            params = count_params(self.algorithm.policy.actor)
            plan = plan_sharding(ranks, params, self.group.device, self.group.env.world_size)
            held = [_on_host(self.algorithm.state_dict()), plan]
        dist.broadcast_object_list(held, src=self.group.lead)
        if not self.group.is_lead:
            self.algorithm.load_state_dict(held[0])
        plan = held[1]
        if not isinstance(plan, ShardPlan):
            raise RankError(f"the lead sent no shard plan but {plan!r}")
        return plan

    def _mean(self, values: Mapping[str, float]) -> dict[str, float]:
        return self.parallel.mean(values) if values else {}


def lead_gather(ranked: RankedUpdate, channel: LeadChannel) -> Gather:
    """How the lead's policy gathers its sharded actor for publication: every rank joins through `Op.GATHER`."""

    def gather(into: torch.Tensor) -> None:
        with channel.command(Op.GATHER):
            ranked.gather(into)

    return gather


def _on_host(value: Any) -> Any:
    """`value` (a state dict) with every tensor copied to the host, so any rank can load it on its own device."""
    if isinstance(value, Mapping):
        return {k: _on_host(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_host(v) for v in value)
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value
