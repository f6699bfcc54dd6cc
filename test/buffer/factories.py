"""Deterministic transitions and episodes for the buffer tests (small JPEG images, so tests stay fast)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.interfaces.domain import Action, EncodedImage, Observation, Transition
from user.interfaces.images import encode_jpeg

STATE_DIM = 7
ACTION_DIM = 4
CAMERAS = ("wrist", "front")
BASE_NS = 1_700_000_000_000_000_000


@functools.lru_cache(maxsize=64)
def jpeg(seed: int, size: int = 16) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    return encode_jpeg(pixels, quality=80)


def observation(robot: str, episode: int, step: int, *, version: int = 0, images: bool = True) -> Observation:
    stamp = BASE_NS + (episode * 1000 + step) * 100_000_000
    imgs = (
        tuple(EncodedImage(cam, "jpeg", jpeg((episode * 31 + step) % 64), stamp) for cam in CAMERAS) if images else ()
    )
    return Observation(
        robot_id=robot,
        task="peg_insertion",
        episode_id=episode,
        step=step,
        state=np.full(STATE_DIM, episode + step / 1000.0, dtype=np.float32),
        stamp_ns=stamp,
        images=imgs,
        policy_version=version,
    )


def transition(
    robot: str,
    episode: int,
    step: int,
    steps: int,
    *,
    version: int = 0,
    demo: bool = False,
    intervened: bool = False,
    success: bool = False,
    images: bool = True,
) -> Transition:
    last = step == steps - 1
    return Transition(
        observation=observation(robot, episode, step, version=version, images=images),
        action=Action(
            robot_id=robot,
            episode_id=episode,
            step=step,
            data=np.full(ACTION_DIM, step, dtype=np.float32),
            intervened=intervened,
            source=1 if intervened else 0,
            policy_version=version,
        ),
        reward=1.0 if last and success else 0.0,
        next_observation=observation(robot, episode, step + 1, version=version, images=images),
        terminated=last and success,
        truncated=last and not success,
        success=last and success,
        is_demo=demo,
        stamp_ns=BASE_NS + (episode * 1000 + step) * 100_000_000 + 1,
    )


def episode(robot: str, episode_id: int, steps: int = 5, **kwargs: object) -> list[Transition]:
    """A whole episode whose last transition is done (terminated if success=True, else truncated)."""
    return [transition(robot, episode_id, s, steps, **kwargs) for s in range(steps)]  # type: ignore[arg-type]


def scalar(index: Any, sql: str, args: Sequence[Any] = ()) -> Any:
    """The first column of the first row `sql` reads from `index` (an `IndexFile`), None for no row."""
    rows = index.fetchall(sql, args)
    return rows[0][0] if rows else None


def elided(t: Transition) -> Transition:
    """`t` as a step that does not keep its next images stores it: each next-observation image a placeholder
    (`IN_NEXT_STEP`: the frame is the next step's observation image); no images: `t` itself."""
    if not t.next_observation.images:
        return t
    held = tuple(EncodedImage(img.camera, IN_NEXT_STEP, b"", img.stamp_ns) for img in t.next_observation.images)
    return replace(t, next_observation=replace(t.next_observation, images=held))
