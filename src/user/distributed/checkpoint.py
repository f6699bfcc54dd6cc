"""Checkpoints of a learner's ranks through `torch.distributed.checkpoint` (DCP): saved atomically, resumed at any
world size.

Layout under the checkpoint directory: `dcp_<step>/` (a complete DCP checkpoint: `.metadata` and the `.distcp`
files), written first as `.dcp_<step>.partial/` and renamed once every rank has written its part, so a kill in the
middle of a save leaves the previous checkpoint the newest complete one (a partial directory is ignored, and
removed by the next save). `latest_dcp` names the newest one (written atomically).

Two ways to save, by what the ranks hold:

- replicated (data-parallel: every rank holds the same weights): the lead rank writes the whole state alone, so no
  other machine's disk is ever needed; on resume the lead reads it and hands every tensor to the others over the
  group. Any world size reads it, one rank included.
- sharded (FSDP2: each rank holds a shard as DTensors): every rank writes its shard (DCP plans who writes what);
  a resume at another world size re-shards, which needs every shard readable by the ranks that load (one machine,
  or a checkpoint directory on a shared filesystem).

`read_whole` reads any of them in one process, without a group and without a structure to load into: every
tensor whole (sharded ones re-assembled), e.g. for the lead of a learner about to hand its state to its ranks, or a
learner of one process resuming what several saved.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException: `except Exception` misses it
from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystemReader
from torch.distributed.checkpoint.state_dict_loader import _load_state_dict
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import save as dcp_save

from user.distributed.group import RankError, RankGroup

LATEST = "latest_dcp"
_COMPLETE = re.compile(r"^dcp_(\d+)$")

_log = logging.getLogger(__name__)


class CheckpointError(RankError):
    """A DCP checkpoint could not be written or read; the message names the directory."""


class Stateful(Protocol):
    """What a checkpoint holds (DCP's `Stateful`): a state dict out, the same structure back in."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...


def save(app: Stateful, directory: Path, step: int, group: RankGroup, *, sharded: bool, keep: int = 3) -> Path:
    """Write `app` as checkpoint `step` (a collective: every rank calls it); the complete directory."""
    state = {"app": app}
    final, partial = directory / f"dcp_{step}", directory / f".dcp_{step}.partial"
    if group.is_lead:
        directory.mkdir(parents=True, exist_ok=True)
        for stale in [*directory.glob(".dcp_*.partial"), *directory.glob(".dcp_*.replaced")]:
            shutil.rmtree(stale, ignore_errors=True)  # a save a kill interrupted
    dist.barrier()
    failed: BaseException | None = None
    try:
        if sharded:
            partial.mkdir(parents=True, exist_ok=True)
            dcp_save(state, checkpoint_id=partial)
        elif group.is_lead:
            with _alone():
                dcp_save(state, checkpoint_id=partial, no_dist=True)
    except (Exception, CheckpointException) as exc:  # a full disk: OSError, or CheckpointException on every rank
        failed = exc
    if _any_rank(failed is not None, group):  # every part written before the checkpoint counts as complete
        if group.is_lead:
            shutil.rmtree(partial, ignore_errors=True)
        cause = failed if failed is not None else "another rank could not write its part"
        raise CheckpointError(f"checkpoint {step} not written to {directory} ({cause}); the last one is unchanged")
    if group.is_lead:
        _complete_as(partial, final)
        _point_latest(directory, final.name)
        _prune(directory, keep)
    dist.barrier()
    if sharded and partial.exists():
        _complete_as(partial, final)  # another machine's own disk: its shards complete there too
    return final


def _complete_as(partial: Path, final: Path) -> None:
    """`partial` renamed `final`; a checkpoint of the same step already there (a learner's final save right after a
    periodic one) is moved aside first and removed after."""
    if not final.exists():
        os.replace(partial, final)
        return
    aside = final.with_name(f".{final.name}.replaced")
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(final, aside)
    os.replace(partial, final)
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _alone() -> Iterator[None]:
    """DCP without the group, as meant: its warning that it assumes one process (at every save) is not logged."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _any_rank(flag: bool, group: RankGroup) -> bool:
    """Whether `flag` is set on any rank (a collective; also the barrier after every rank's part)."""
    packed = torch.tensor([int(flag)], dtype=torch.int64, device=group.device)
    dist.all_reduce(packed, op=dist.ReduceOp.MAX)
    return bool(packed.item())


def latest(directory: Path) -> Path | None:
    """The newest complete checkpoint under `directory`, or None."""
    pointer = directory / LATEST
    if pointer.is_file():
        named = directory / pointer.read_text(encoding="utf-8").strip()
        if (named / ".metadata").is_file():
            return named
    found = sorted(_complete(directory), key=lambda p: int(p.name.split("_")[1]))
    return found[-1] if found else None


def load(app: Stateful, checkpoint: Path, group: RankGroup, *, sharded: bool) -> None:
    """Load `app` (built the same way on every rank) from `checkpoint` (a collective)."""
    if sharded:
        _read({"app": app}, checkpoint, no_dist=False)
        return
    if group.is_lead:
        _read({"app": app}, checkpoint, no_dist=True)
    state = app.state_dict()
    broadcast_state(state, group)
    if not group.is_lead:
        app.load_state_dict(state)


def read_whole(checkpoint: Path) -> dict[str, Any]:
    """Everything `checkpoint` holds, as saved (`{"app": ...}`), tensors whole and on the host; read by this process
    alone (every shard must be readable here: one machine, or a shared filesystem). Keys come back as strings."""
    whole: dict[str, Any] = {}
    try:  # how torch's format_utils.dcp_to_torch_save reads, without its round trip through a file; no_dist even
        # in a formed group: the other ranks take no part
        planner = _EmptyStateDictLoadPlanner()  # type: ignore[no-untyped-call]
        with _alone():
            _load_state_dict(whole, FileSystemReader(checkpoint), planner=planner, no_dist=True)
        return whole
    except (Exception, CheckpointException) as exc:  # DCP raises CheckpointException or plain errors
        raise CheckpointError(f"cannot read the checkpoint {checkpoint}: {exc}") from exc


def broadcast_state(state: dict[str, Any], group: RankGroup) -> None:
    """Every tensor and value of the lead's `state` copied into every other rank's `state` of the same structure."""
    leaves = list(_leaves(state))
    tensors = [(holder, key) for holder, key in leaves if isinstance(holder[key], torch.Tensor)]
    others: list[Any] = [[holder[key] for holder, key in leaves if not isinstance(holder[key], torch.Tensor)]]
    dist.broadcast_object_list(others, src=group.lead)
    plain = iter(others[0])
    for holder, key in leaves:
        if not isinstance(holder[key], torch.Tensor):
            holder[key] = next(plain)
    for holder, key in tensors:
        tensor: torch.Tensor = holder[key]
        wire = tensor.detach().to(group.device)
        dist.broadcast(wire, src=group.lead)
        with torch.no_grad():
            tensor.copy_(wire)


def _read(state: dict[str, Any], checkpoint: Path, *, no_dist: bool) -> None:
    try:
        with _alone() if no_dist else contextlib.nullcontext():
            dcp_load(state, checkpoint_id=checkpoint, no_dist=no_dist)
    except (Exception, CheckpointException) as exc:  # per-rank failures (CheckpointException) or plain errors
        raise CheckpointError(f"cannot read the checkpoint {checkpoint}: {exc}") from exc


def _leaves(node: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every leaf of nested dicts and lists, in a fixed order."""
    items = node.items() if isinstance(node, dict) else enumerate(node)  # the same order on every rank
    for key, value in items:
        if isinstance(value, dict | list):
            yield from _leaves(value)
        else:
            yield node, key


def _complete(directory: Path) -> Iterator[Path]:
    if directory.is_dir():
        for child in directory.iterdir():
            if _COMPLETE.match(child.name) and (child / ".metadata").is_file():
                yield child


def _point_latest(directory: Path, name: str) -> None:
    tmp = directory / f".{LATEST}.tmp"
    tmp.write_text(name + "\n", encoding="utf-8")
    os.replace(tmp, directory / LATEST)


def _prune(directory: Path, keep: int) -> None:
    found = sorted(_complete(directory), key=lambda p: int(p.name.split("_")[1]))
    for old in found[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
        _log.debug("removed the old checkpoint %s", old)
