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
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.distributed as dist
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
        for stale in directory.glob(".dcp_*.partial"):
            shutil.rmtree(stale, ignore_errors=True)  # a save a kill interrupted
    dist.barrier()
    if sharded:
        partial.mkdir(parents=True, exist_ok=True)
        dcp_save(state, checkpoint_id=partial)
    elif group.is_lead:
        dcp_save(state, checkpoint_id=partial, no_dist=True)
    dist.barrier()  # every part written before the checkpoint counts as complete
    if group.is_lead:
        os.replace(partial, final)
        _point_latest(directory, final.name)
        _prune(directory, keep)
    dist.barrier()
    if sharded and partial.exists() and not final.exists():
        os.replace(partial, final)  # another machine's own disk: its shards complete there too
    return final


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
        dcp_load(state, checkpoint_id=checkpoint, no_dist=no_dist)
    except Exception as exc:  # DCP raises CheckpointException (per-rank failures) or plain errors
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
