"""Action chunks: for each sampled step, the next H actions of its episode (what a chunk learner such as π0
imitates), with a mask where the chunk runs past the episode's end and the human's steps marked.

An episode is committed whole, in one transaction, so its transitions carry consecutive numbers (`Columns` refuses
anything else, and recovery renumbers later episodes down so they stay consecutive); an episode also never spans
two segments. The chunk of step i is therefore transitions i, i+1, ..., i+H-1 for as long as they belong to i's
episode: found from the in-memory columns alone (`chunk_rows`), without SQL. Past the episode's end the chunk
repeats the episode's last action (so the padded tail is a plausible "hold", as LeRobot's and openpi's data
loaders clamp to the episode's last frame) and its mask is False. Only the actions are read (`DiskStorage.actions`:
the cache's action column, else the transition record without its camera frames).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from user.buffer.batch import TransitionBatch
from user.buffer.columns import ColumnView
from user.buffer.errors import BufferError


class ChunkRows(NamedTuple):
    """Which transitions make up the chunks of a batch."""

    rows: np.ndarray  # (B, H) int64 transition numbers; past the episode's end, its last transition again
    mask: np.ndarray  # (B, H) bool: False past the episode's end


def chunk_rows(view: ColumnView, indices: np.ndarray, horizon: int) -> ChunkRows:
    """The transitions of the H-step chunks starting at `indices` (transition numbers held in `view`)."""
    if horizon < 1:
        raise BufferError(f"an action chunk holds one action at least, not {horizon}")
    indices = np.asarray(indices, dtype=np.int64)
    if len(indices) and (indices.min() < 0 or indices.max() >= view.size):
        raise BufferError(f"chunks asked from transitions {indices.min()}..{indices.max()}; {view.size} are stored")
    ahead = indices[:, None] + np.arange(horizon, dtype=np.int64)[None, :]
    inside = ahead < view.size
    same = view.episode[np.minimum(ahead, view.size - 1)] == view.episode[indices][:, None]
    mask = inside & same  # a prefix of each row: an episode's transitions are consecutive
    last = indices + mask.sum(axis=1) - 1  # the episode's last transition within reach
    return ChunkRows(np.minimum(ahead, last[:, None]), mask)


def with_chunks(batch: TransitionBatch, view: ColumnView, actions: np.ndarray, chunks: ChunkRows) -> TransitionBatch:
    """`batch` carrying its chunks: `actions` holds the action of every distinct transition of `chunks.rows`, in
    the order of `np.unique(chunks.rows)`."""
    unique, where = np.unique(chunks.rows, return_inverse=True)
    if len(actions) != len(unique):
        raise BufferError(f"{len(actions)} actions read for the {len(unique)} transitions of the chunks")
    action_chunk = np.asarray(actions, dtype=np.float32)[where.reshape(chunks.rows.shape)]
    intervened = view.intervened[chunks.rows] & chunks.mask
    return replace(batch, action_chunk=action_chunk, chunk_mask=chunks.mask.copy(), chunk_intervened=intervened)
