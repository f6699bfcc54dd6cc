"""Each rank's share of a global batch: the lead rank samples the batch from the persistent buffer (the configured
sampler, today's batch size, today's distribution) and scatters contiguous row blocks, one per rank, over the
process group. No other rank reads the buffer, so a rank on another machine needs nothing of the lead's disk,
and no rank ever trains on data newer than the others': every share comes from the one batch the lead drew.

Numeric arrays go through `dist.scatter` (bools as uint8: gloo does not reduce or scatter bool tensors on every
build); arrays of compressed image bytes (undecoded JPEG/PNG) go through `scatter_object_list`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from user.buffer.batch import CAMERA_ARRAYS, CHUNK_ARRAYS, ROW_ARRAYS, TransitionBatch
from user.distributed.group import RankError, RankGroup


@dataclass(frozen=True)
class _Layout:
    """What every rank needs to receive its share: the arrays in scatter order, and the batch's constants."""

    arrays: tuple[tuple[str, str, str, tuple[int, ...]], ...]  # (field, camera or "", dtype, shape of one row)
    rows_per_rank: int
    state_names: tuple[str, ...]


def share_batch(group: RankGroup, batch: TransitionBatch | None) -> TransitionBatch:
    """This rank's rows of the lead's `batch` (rank r gets rows r*b .. (r+1)*b - 1, b = len(batch) / world).
    The lead passes the global batch, every other rank None; every rank must call it (a collective)."""
    world, lead = group.env.world_size, group.lead
    if group.is_lead:
        if batch is None:
            raise RankError("the lead rank must pass the global batch it sampled")
        layout = _layout(batch, world)
    elif batch is not None:
        raise RankError(f"rank {group.env.rank} is not the lead ({lead}) and must not pass a batch")
    sent: list[Any] = [layout if group.is_lead else None]
    dist.broadcast_object_list(sent, src=lead)
    layout = sent[0]
    out: dict[str, Any] = {name: {} for name in CAMERA_ARRAYS}
    for name, camera, dtype, row_shape in layout.arrays:
        whole = None if batch is None else (getattr(batch, name)[camera] if camera else getattr(batch, name))
        part = _scatter(group, whole, np.dtype(dtype), (layout.rows_per_rank, *row_shape))
        if camera:
            out[name][camera] = part
        else:
            out[name] = part
    template = batch if batch is not None else _empty_like(layout)
    return replace(template, **out, state_names=layout.state_names)


def _layout(batch: TransitionBatch, world: int) -> _Layout:
    if len(batch) % world:
        raise RankError(f"a batch of {len(batch)} rows does not split evenly over {world} ranks (batch_size % ranks)")
    arrays: list[tuple[str, str, str, tuple[int, ...]]] = []
    for name in (*ROW_ARRAYS, *CHUNK_ARRAYS):  # action chunks travel with their rows, when the batch has them
        array = getattr(batch, name)
        if array is not None:
            arrays.append((name, "", array.dtype.str, tuple(array.shape[1:])))
    for name in CAMERA_ARRAYS:
        for camera, array in sorted(getattr(batch, name).items()):
            arrays.append((name, camera, array.dtype.str, tuple(array.shape[1:])))
    return _Layout(tuple(arrays), len(batch) // world, batch.state_names)


def _scatter(group: RankGroup, whole: np.ndarray | None, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    """This rank's block of `whole` (given on the lead only)."""
    world, lead = group.env.world_size, group.lead
    if dtype == np.dtype(object):  # compressed image bytes: pickled per rank
        chunks = None if whole is None else [list(c) for c in np.split(whole, world)]
        got: list[Any] = [None]
        dist.scatter_object_list(got, chunks, src=lead)
        out = np.empty(shape[0], dtype=object)
        out[:] = got[0]
        return out
    wire = np.dtype(np.uint8) if dtype == np.dtype(bool) else dtype
    received = torch.empty(shape, dtype=_torch_dtype(wire), device=group.device)
    parts = None
    if whole is not None:
        blocks = np.split(np.ascontiguousarray(whole, dtype=wire), world)
        parts = [torch.from_numpy(b).to(group.device) for b in blocks]
    dist.scatter(received, parts, src=lead)
    array = received.cpu().numpy()
    return array.astype(bool) if dtype == np.dtype(bool) else array


def _torch_dtype(dtype: np.dtype[Any]) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def _empty_like(layout: _Layout) -> TransitionBatch:
    """A zero-row batch to fill in (a rank other than the lead has no batch of its own)."""
    fields: dict[str, Any] = {name: {} for name in CAMERA_ARRAYS}
    for name, camera, dtype, row_shape in layout.arrays:
        empty = np.empty((0, *row_shape), dtype=np.dtype(dtype))
        if camera:
            fields[name][camera] = empty
        else:
            fields[name] = empty
    return TransitionBatch(**fields, state_names=layout.state_names)
