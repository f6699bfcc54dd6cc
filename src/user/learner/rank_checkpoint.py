"""Checkpoints of a learner with ranks: DCP checkpoints (`user.distributed.checkpoint`) in the learner's checkpoint
directory, beside the single-file `latest.pt` a learner of one process writes; a resume takes the newest complete
one of either format, with ranks or without.

The lead starts a save with `Op.CHECKPOINT` and says where (directory, step, sharded or not); every rank then
writes its part: with a sharded actor each its shards (DTensors), else the lead alone (the others only wait for it).
What a checkpoint holds (`RankState`): the algorithm's tensors by their path in its state dict, the rest of that
state (counters, optimizer settings) as one pickled skeleton with the tensors' places marked, so any algorithm's
state (optimizer states keyed by number included) comes back as it was; and, from the lead only, its lead-only state
(the buffer's sampler state, the trainer's and the learner's counters) pickled as one value.

A resume reads a DCP checkpoint whole in one process (`read_whole`: every shard readable there, which holds on one
machine or with a shared checkpoint directory), so a learner of one process resumes what two ranks saved, and the
lead of a learner with ranks hands what it read to the others as it does a single-file checkpoint's.

When the ranks cannot write together (a rank died: the lead's final checkpoint before torchrun restarts the group),
the lead of a data-parallel learner, which holds the whole state, writes `latest.pt` alone, the newest checkpoint
the restart resumes from; a sharded actor's lead holds a shard only, and the restart resumes the last DCP one.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from user.algorithms.base import Algorithm
from user.distributed import checkpoint as dcp
from user.distributed.commands import LeadChannel, Op
from user.distributed.current import ThisRank
from user.distributed.group import RankGroup
from user.learner.checkpoint import (
    FORMAT,
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    CheckpointWriteError,
    LearnerCounters,
)
from user.learner.trainer import TrainerCounters

_log = logging.getLogger("user.learner.checkpoint")


@dataclass(frozen=True)
class _Slot:
    """Where a tensor sat in the algorithm's state dict (in the pickled skeleton)."""

    path: str


class RankState:
    """One rank's part of a DCP checkpoint (DCP's `Stateful`); `lead`: the lead's pickled lead-only state."""

    def __init__(self, algorithm: Algorithm, lead: bytes | None) -> None:
        self.algorithm = algorithm
        self.lead = lead

    def state_dict(self) -> dict[str, Any]:
        tensors: dict[str, torch.Tensor] = {}
        skeleton = _split(self.algorithm.state_dict(), "", tensors)
        out: dict[str, Any] = {"tensors": tensors, "skeleton": pickle.dumps(skeleton)}
        if self.lead is not None:
            out["lead"] = self.lead
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algorithm.load_state_dict(_join(pickle.loads(state["skeleton"]), state["tensors"]))


def newest(store: CheckpointStore) -> Path | None:
    """The newest complete checkpoint in the store's directory, `latest.pt` or a DCP one (by when each was
    completed), or None."""
    found = [store.latest] if store.exists() else []
    distributed = dcp.latest(store.directory)
    if distributed is not None:
        found.append(distributed)
    return max(found, key=_completed, default=None)


def read(path: Path, store: CheckpointStore, policy_id: str) -> Checkpoint:
    """The checkpoint at `path` (from `newest`), its algorithm state whole and on the host."""
    if not path.is_dir():
        return store.load(policy_id)
    try:
        app = dcp.read_whole(path)["app"]
        lead = pickle.loads(app["lead"])
        algorithm = _join(pickle.loads(app["skeleton"]), app.get("tensors", {}))
    except (dcp.CheckpointError, KeyError, pickle.UnpicklingError, EOFError) as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint ({exc})") from exc
    if lead.get("format") != FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {lead.get('format')!r}, expected {FORMAT}")
    if lead["policy_id"] != policy_id:
        raise CheckpointError(f"{path}: checkpoint of policy {lead['policy_id']!r}, this learner trains {policy_id!r}")
    return Checkpoint(
        algorithm=algorithm,
        buffer=lead["buffer"],
        trainer=TrainerCounters(**lead["trainer"]),
        learner=LearnerCounters(**lead["learner"]),
        policy_id=policy_id,
    )


def write(
    checkpoint: Checkpoint, algorithm: Algorithm, store: CheckpointStore, rank: ThisRank | None, *, sharded: bool | None
) -> Path:
    """`checkpoint` as `latest.pt` (a learner of one process: `sharded` None), else as a DCP checkpoint the lead
    `rank` writes with the others (`sharded`: every rank writes its shards of the actor)."""
    if sharded is None or rank is None or rank.channel is None:
        return store.save(checkpoint)
    try:
        return save(checkpoint, algorithm, store, rank.group, rank.channel, sharded=sharded)
    except (CheckpointWriteError, RuntimeError) as exc:  # gloo/NCCL: a rank died or hangs past the deadline
        if sharded:
            raise CheckpointWriteError(f"no checkpoint: the ranks could not write it together ({exc})") from exc
        _log.warning("the ranks could not write a checkpoint together (%s): the lead writes its whole state alone", exc)
        return store.save(dataclasses.replace(checkpoint, algorithm=algorithm.state_dict()))


def save(
    checkpoint: Checkpoint,
    algorithm: Algorithm,
    store: CheckpointStore,
    group: RankGroup,
    channel: LeadChannel,
    *,
    sharded: bool,
) -> Path:
    """The lead's save: `checkpoint`'s lead-only state and every rank's algorithm state as DCP checkpoint
    `dcp_<update calls>`; `CheckpointWriteError` when it could not be written (the last one is unchanged)."""
    lead = pickle.dumps(
        {
            "format": FORMAT,
            "policy_id": checkpoint.policy_id,
            "buffer": checkpoint.buffer,
            "trainer": dataclasses.asdict(checkpoint.trainer),
            "learner": dataclasses.asdict(checkpoint.learner),
        }
    )
    where: list[Any] = [str(store.directory), checkpoint.trainer.update_calls, sharded, store.keep]
    with channel.command(Op.CHECKPOINT):
        dist.broadcast_object_list(where, src=group.lead)
        return _write(RankState(algorithm, lead), where, group)


def join_save(algorithm: Algorithm, group: RankGroup) -> Path:
    """A follower's part of the lead's `save`, after `Op.CHECKPOINT`."""
    where: list[Any] = [None, None, None, None]
    dist.broadcast_object_list(where, src=group.lead)
    return _write(RankState(algorithm, None), where, group)


def _write(app: RankState, where: list[Any], group: RankGroup) -> Path:
    directory, step, sharded, keep = where
    try:
        return dcp.save(app, Path(directory), int(step), group, sharded=bool(sharded), keep=int(keep))
    except dcp.CheckpointError as exc:
        raise CheckpointWriteError(str(exc)) from exc


def _completed(path: Path) -> int:
    marker = path / ".metadata" if path.is_dir() else path
    return marker.stat().st_mtime_ns


def _split(value: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    """`value` with every tensor moved into `tensors` under its path and replaced by a `_Slot`."""
    if isinstance(value, torch.Tensor):
        tensors[path] = value
        return _Slot(path)
    if isinstance(value, Mapping):
        return {k: _split(v, f"{path}/{k}", tensors) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_split(v, f"{path}/{i}", tensors) for i, v in enumerate(value))
    return value


def _join(value: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    """The state `_split` took apart, its tensors put back."""
    if isinstance(value, _Slot):
        if value.path not in tensors:
            raise KeyError(f"tensor {value.path} is missing")
        return tensors[value.path]
    if isinstance(value, Mapping):
        return {k: _join(v, tensors) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_join(v, tensors) for v in value)
    return value
