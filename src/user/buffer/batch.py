"""Typed batches: transitions stacked into numpy arrays, one field per quantity (never string-keyed data)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from user.buffer.errors import BufferError
from user.interfaces.domain import Observation, Transition
from user.interfaces.images import ImageCodecError, decode_image


class BatchError(BufferError):
    """Transitions of one batch do not stack (different state sizes, state names, cameras or image shapes)."""


@dataclass(frozen=True)
class TransitionBatch:
    """B transitions, stacked. Images are (B, H, W, 3) uint8 when decoded, else (B,) arrays of JPEG/PNG bytes.

    Every field annotated `np.ndarray` holds one entry per row, and so does each camera's array of the
    `dict[str, np.ndarray]` fields: `map`, `take` and `concat` find them from the annotations, so a field
    added here is carried by all three without another list to update. The action-chunk fields (annotated
    `np.ndarray | None`) are there only when the buffer was asked for chunks (`BufferConfig.chunk_horizon`), and are
    then carried the same way; a batch without them is today's batch."""

    indices: np.ndarray  # (B,) int64 transition numbers in the buffer
    state: np.ndarray  # (B, S) float32
    action: np.ndarray  # (B, A) float32
    reward: np.ndarray  # (B,) float32
    next_state: np.ndarray  # (B, S) float32
    terminated: np.ndarray  # (B,) bool: no bootstrapping from next_state
    truncated: np.ndarray  # (B,) bool: the episode was cut (bootstrapping allowed)
    success: np.ndarray  # (B,) bool
    is_demo: np.ndarray  # (B,) bool
    intervened: np.ndarray  # (B,) bool: a human chose this action
    policy_version: np.ndarray  # (B,) int64: version of the policy that acted
    images: dict[str, np.ndarray]  # camera -> pixels or compressed bytes of the observation
    next_images: dict[str, np.ndarray]  # camera -> pixels or compressed bytes of the next observation
    state_names: tuple[str, ...] = ()  # names of the S columns of state and next_state; () = unnamed
    action_chunk: np.ndarray | None = None  # (B, H, A) float32: this step's action and the next H - 1 of its
    # episode; past the episode's end the episode's last action is repeated (and masked out)
    chunk_mask: np.ndarray | None = None  # (B, H) bool: False where the chunk runs past the episode's end
    chunk_intervened: np.ndarray | None = None  # (B, H) bool: a human chose that action (False past the end)

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def done(self) -> np.ndarray:
        done: np.ndarray = np.logical_or(self.terminated, self.truncated)
        return done

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> TransitionBatch:
        """This batch with `fn` applied to every per-row array (each camera's too); the state names stay."""
        return _per_array([self], lambda arrays: fn(arrays[0]), self.state_names)

    @property
    def horizon(self) -> int:
        """H, the actions of each row's chunk; 0 when the batch carries no chunks."""
        return 0 if self.action_chunk is None else int(self.action_chunk.shape[1])

    def take(self, rows: np.ndarray) -> TransitionBatch:
        """The rows at `rows` (indices, in their order, or a boolean mask) of every per-row array."""
        return self.map(lambda array: array[rows])

    def fill(self, rows: np.ndarray, other: TransitionBatch) -> TransitionBatch:
        """This batch with its rows `rows` set to `other`'s rows, in order, in place (the arrays must be this
        batch's own, e.g. gathered); `BatchError` when they do not fit one batch (shapes, cameras, state names)."""
        if other.images.keys() != self.images.keys() or other.next_images.keys() != self.next_images.keys():
            raise BatchError(f"cannot mix transitions with cameras {sorted(self.images)} and {sorted(other.images)}")
        names = _agree(self.state_names, other.state_names, f"transition {int(other.indices[0])}")
        if self.horizon != other.horizon:
            raise BatchError(f"cannot mix rows with action chunks of {self.horizon} and {other.horizon} actions")
        try:
            for name in (*ROW_ARRAYS, *_present(self)):
                getattr(self, name)[rows] = getattr(other, name)
            for name in CAMERA_ARRAYS:
                for cam, array in getattr(self, name).items():
                    array[rows] = getattr(other, name)[cam]
        except ValueError as exc:
            raise BatchError(f"transitions of one batch do not stack: {exc}") from exc
        return replace(self, state_names=names)

    @staticmethod
    def concat(batches: Sequence[TransitionBatch]) -> TransitionBatch:
        """The rows of each batch in turn. The batches must have the same cameras and state names that agree
        (unnamed rows fit any names, as in `collate`)."""
        if not batches:
            raise BatchError("cannot concatenate no batches")
        first = batches[0]
        for other in batches[1:]:
            if other.images.keys() != first.images.keys() or other.next_images.keys() != first.next_images.keys():
                raise BatchError(f"cannot mix batches with cameras {sorted(first.images)} and {sorted(other.images)}")
        names: tuple[str, ...] = ()
        for k, other in enumerate(batches):
            names = _agree(names, other.state_names, f"batch {k}")
            if other.horizon != first.horizon:
                raise BatchError(f"cannot mix batches with chunks of {first.horizon} and {other.horizon} actions")
        return _per_array(batches, np.concatenate, names)


def _array_fields() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(fields that are one array of rows, fields that map each camera to an array of rows, fields that are an
    array of rows or None), by annotation."""
    hints = typing.get_type_hints(TransitionBatch)
    names = [f.name for f in fields(TransitionBatch)]
    return (
        tuple(n for n in names if hints[n] is np.ndarray),
        tuple(n for n in names if hints[n] == dict[str, np.ndarray]),
        tuple(n for n in names if hints[n] == np.ndarray | None),
    )


# ROW_ARRAYS: always there; CHUNK_ARRAYS: arrays of rows when the batch carries action chunks, else None
ROW_ARRAYS, CAMERA_ARRAYS, CHUNK_ARRAYS = _array_fields()


def _present(batch: TransitionBatch) -> tuple[str, ...]:
    """The optional per-row arrays `batch` carries."""
    return tuple(name for name in CHUNK_ARRAYS if getattr(batch, name) is not None)


def _per_array(
    batches: Sequence[TransitionBatch], fn: Callable[[list[np.ndarray]], np.ndarray], state_names: tuple[str, ...]
) -> TransitionBatch:
    """A batch whose every per-row array is `fn` of that array in each of `batches` (cameras of the first)."""
    names = (*ROW_ARRAYS, *_present(batches[0]))  # the batches carry the same (`concat` checked their horizons)
    out: dict[str, Any] = {name: fn([getattr(b, name) for b in batches]) for name in names}
    for name in CAMERA_ARRAYS:
        cameras: dict[str, np.ndarray] = getattr(batches[0], name)
        out[name] = {cam: fn([getattr(b, name)[cam] for b in batches]) for cam in cameras}
    return replace(batches[0], **out, state_names=state_names)


def _agree(names: tuple[str, ...], row: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The state names of a batch so far (`names`) and of one more `row`: unnamed (positional) state fits any
    names; two different name lists in one batch are an error, since one column selection serves the batch."""
    if row is names or not row or row == names:
        return names
    if names:
        raise BatchError(f"{what}: state names {_short(row)} differ from the batch's {_short(names)}")
    return row


def _short(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:4])
    return f"({shown}{', ...' if len(names) > 4 else ''}; {len(names)} names)"


def _state_names(
    observations: Sequence[Observation], indices: np.ndarray, names: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The state names shared by `observations` (drawn as `indices`), starting from `names`."""
    for k, obs in enumerate(observations):
        row = obs.state_names
        if row is not names:  # the usual case: one interned tuple for all rows of a robot
            names = _agree(names, row, f"transition {int(indices[k])}")
    return names


def _stack(values: Sequence[np.ndarray], what: str, indices: np.ndarray, dtype: type[np.generic]) -> np.ndarray:
    first = np.shape(values[0])
    for k, v in enumerate(values):
        if np.shape(v) != first:
            raise BatchError(f"transition {int(indices[k])}: {what} has shape {np.shape(v)}, the batch uses {first}")
    stacked: np.ndarray = np.stack(values).astype(dtype, copy=False)
    return stacked


def _images(obs: Sequence[Observation], indices: np.ndarray, decode: bool) -> dict[str, np.ndarray]:
    cameras = [img.camera for img in obs[0].images]
    out: dict[str, np.ndarray] = {}
    for cam in cameras:
        frames: list[bytes] = []
        for k, o in enumerate(obs):
            match = [img.data for img in o.images if img.camera == cam]
            if not match:
                raise BatchError(f"transition {int(indices[k])}: no image from camera {cam!r}")
            frames.append(match[0])
        if decode:
            try:
                out[cam] = _stack([decode_image(f) for f in frames], f"camera {cam!r} image", indices, np.uint8)
            except ImageCodecError as exc:
                raise BatchError(f"camera {cam!r}: {exc}") from exc
        else:
            arr = np.empty(len(frames), dtype=object)
            arr[:] = frames
            out[cam] = arr
    return out


def collate(transitions: Sequence[Transition], indices: np.ndarray, *, decode_images: bool) -> TransitionBatch:
    """Stack `transitions` (drawn as `indices`) into a batch."""
    if not transitions:
        raise BatchError("cannot build an empty batch")
    obs = [t.observation for t in transitions]
    nxt = [t.next_observation for t in transitions]
    return TransitionBatch(
        indices=np.asarray(indices, dtype=np.int64),
        state=_stack([o.state for o in obs], "state", indices, np.float32),
        action=_stack([t.action.data for t in transitions], "action", indices, np.float32),
        reward=np.asarray([t.reward for t in transitions], dtype=np.float32),
        next_state=_stack([o.state for o in nxt], "next state", indices, np.float32),
        terminated=np.asarray([t.terminated for t in transitions], dtype=bool),
        truncated=np.asarray([t.truncated for t in transitions], dtype=bool),
        success=np.asarray([t.success for t in transitions], dtype=bool),
        is_demo=np.asarray([t.is_demo for t in transitions], dtype=bool),
        intervened=np.asarray([t.action.intervened for t in transitions], dtype=bool),
        policy_version=np.asarray([t.action.policy_version for t in transitions], dtype=np.int64),
        images=_images(obs, indices, decode_images),
        next_images=_images(nxt, indices, decode_images),
        state_names=_state_names(nxt, indices, _state_names(obs, indices)),
    )
