"""Typed batches: transitions stacked into numpy arrays, one field per quantity (never string-keyed data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from user.buffer.errors import BufferError
from user.interfaces.domain import Observation, Transition
from user.interfaces.images import ImageCodecError, decode_image


class BatchError(BufferError):
    """Transitions of one batch do not stack (different state sizes, cameras or image shapes)."""


@dataclass(frozen=True)
class TransitionBatch:
    """B transitions, stacked. Images are (B, H, W, 3) uint8 when decoded, else (B,) arrays of JPEG/PNG bytes."""

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

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def done(self) -> np.ndarray:
        done: np.ndarray = np.logical_or(self.terminated, self.truncated)
        return done


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
    )
