"""Each camera frame stored once: a transition's next-observation images are the next step's observation images.

A robot sends every step's frames twice (as step t's next observation and as step t+1's observation). The
writer stores them once: when step t's next-observation images equal step t+1's observation images (camera,
format, bytes and stamp alike), step t's record keeps only a placeholder for each of them (its camera and
stamp, format `IN_NEXT_STEP`, no bytes) and the frames live in step t+1's record. The last step of an episode,
and any step whose next images differ from its successor's (a camera that dropped a frame, a reset), keeps
its next images whole. Reading step t puts step t+1's observation images back (`restore`), so what comes out
is what went in, bit for bit. An incoming image whose format is `IN_NEXT_STEP` is refused
(`camera_topics.image_problem`). The frames a record keeps are themselves stored on a topic per camera after
it (`camera_topics`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from user.interfaces.domain import Transition

IN_NEXT_STEP = "user/in-next-step"  # the format of a placeholder: the frame is in the next step's observation


def has_images(t: Transition) -> bool:
    return bool(t.next_observation.images)


def is_elided(t: Transition) -> bool:
    """Whether `t` was read with placeholders for its next images (to be `restore`d from its successor)."""
    return any(img.format == IN_NEXT_STEP for img in t.next_observation.images)


def chained(t: Transition, successor: Transition) -> bool:
    """Whether `t`'s next images are exactly `successor`'s observation images (so they can be stored once)."""
    images = t.next_observation.images
    return bool(images) and images == successor.observation.images


def keeps_next(ts: Sequence[Transition]) -> list[bool]:
    """For each step of episode `ts`: whether it keeps its next images (it has some, and they are not its
    successor's observation images: the last step, a break in the chain)."""
    return [has_images(t) and not (k + 1 < len(ts) and chained(t, ts[k + 1])) for k, t in enumerate(ts)]


def stored_payloads(
    ts: Sequence[Transition], payloads: Sequence[bytes], encode: Callable[[Transition], bytes]
) -> list[bytes]:
    """The bytes each step of episode `ts` is stored as, given `payloads` of their records with the next images
    held in the next step: a step that `keeps_next` is encoded whole with `encode`."""
    return [encode(t) if keep else payload for t, payload, keep in zip(ts, payloads, keeps_next(ts), strict=True)]


def shared(ts: Sequence[Transition]) -> list[Transition]:
    """Episode `ts` with each chained step's next images being its successor's image objects, so that a cache
    holding the episode holds each frame's bytes once."""
    out = list(ts)
    for k in range(len(out) - 1):
        if chained(out[k], out[k + 1]):
            nxt = out[k].next_observation
            out[k] = replace(out[k], next_observation=replace(nxt, images=out[k + 1].observation.images))
    return out


def successor_problem(t: Transition, successor: Transition | None) -> str | None:
    """Why `successor` cannot give `t` its next images back, or None."""
    if successor is None:
        return "its next images are stored in the next step, and the buffer holds no next step"
    want = (t.robot_id, t.episode_id, t.step + 1)
    got = (successor.robot_id, successor.episode_id, successor.step)
    if got != want:
        return f"its next images are stored in step {want[2]} of its episode, but the next record is step {got}"
    cameras = [img.camera for img in t.next_observation.images]
    theirs = [img.camera for img in successor.observation.images]
    if cameras != theirs:
        return f"its next images are cameras {cameras}, the next step's observation has {theirs}"
    return None


def restore(t: Transition, successor: Transition) -> Transition:
    """`t` with its placeholders replaced by `successor`'s observation images (check `successor_problem` first)."""
    return replace(t, next_observation=replace(t.next_observation, images=successor.observation.images))
