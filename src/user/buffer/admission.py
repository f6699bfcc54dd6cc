"""What the buffer admits: every value and id of a transition is checked before any of its bytes are written.

A transition is held to the door's rules (`user.interfaces.validate.check_transition`, one validator for every
node and the buffer): ids and stamps that fit the stored message and the index's SQLite integers, a task that is
text, finite states, next states, actions and rewards within their limits (so finite as float32, and episode
returns too: at most max_episode_steps rewards are summed), consistent ids, real image formats (a placeholder
format the buffer reserves is named as such). The buffer is not told the robots' action space and also stores bags'
actions in their own units, so an action is held to the value limit, not to [-1, 1]: the learner's door checks
the bounds. What only the buffer checks is here: a step against its episode (one shape throughout), wall times
the index can hold, an episode's steps together, and an episode handed over whole.

Each check raises `InvalidMessageError` naming the field and the problem; `problem_of` turns one into the line
the writer reports. A message that fails is refused whole; the segment and the index stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from typing import ParamSpec

import numpy as np

from user.buffer.disk.camera_topics import image_problem
from user.interfaces.domain import Transition
from user.interfaces.validate import InvalidMessageError, check_integer, check_transition

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite INTEGER

P = ParamSpec("P")


def problem_of(check: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> str | None:
    """What `check(...)` refuses, as the one line the writer reports, or None when it passes."""
    try:
        check(*args, **kwargs)
    except InvalidMessageError as exc:
        return str(exc)
    return None


def check_storable(t: Transition) -> None:
    """`t` has its images as a robot sends them (`check_images_as_sent`) and passes the door's checks, its action
    within the value limit (the buffer knows no action space)."""
    check_images_as_sent(t)
    check_transition(t, action_bounds=None)


def check_images_as_sent(t: Transition) -> None:
    """No image of `t` is in a placeholder format the buffer reserves for its records (`camera_topics`). The door
    refuses them too, as no image format; checked first, this says what they are."""
    problem = image_problem(t)
    if problem is not None:
        raise InvalidMessageError("images", "are placeholders", problem)


def _shapes(t: Transition) -> dict[str, tuple[int, ...]]:
    """A step's vectors, by their fields."""
    return {
        "observation.state": np.shape(t.observation.state),
        "next_observation.state": np.shape(t.next_observation.state),
        "action.data": np.shape(t.action.data),
    }


def check_fits_episode(first: Transition, t: Transition) -> None:
    """`t`'s state, next state and action have the shapes they had in `first`, the step its episode began with."""
    want = _shapes(first)
    for name, got in _shapes(t).items():
        if got != want[name]:
            raise InvalidMessageError(
                name, "changes shape in the episode", f"{got}, step {first.step} had {want[name]}"
            )


def check_wall_time(wall_ns: int) -> None:
    """`wall_ns` can be a stored wall time (a SQLite integer)."""
    check_integer("wall_ns", wall_ns, INT64_MAX, INT64_MIN)


def check_step(t: Transition, first: Transition | None, wall_ns: int | None) -> None:
    """`t`, received at `wall_ns` (when known), can be stored as a step of the episode `first` began (when it
    has begun): of that episode's shapes, storable, at a wall time the index can hold. The episode is checked
    first, so a step that changed shape is named as such."""
    if first is not None:
        check_fits_episode(first, t)
    check_storable(t)
    if wall_ns is not None:
        check_wall_time(wall_ns)


def check_episode(transitions: Sequence[Transition], wall_ns: Sequence[int]) -> None:
    """The episode `transitions`, received at `wall_ns`, can be stored: a wall time per step, and every step as
    `check_step` has it (the first that is not is named by its step)."""
    if len(wall_ns) != len(transitions):
        counts = f"{len(wall_ns)} wall times for {len(transitions)} steps"
        raise InvalidMessageError("wall_ns", "do not match the steps", counts)
    for k, t in enumerate(transitions):
        try:
            check_step(t, transitions[0], wall_ns[k])
        except InvalidMessageError as exc:
            raise InvalidMessageError(f"step {t.step}: {exc.field}", exc.problem, exc.detail) from None


def check_whole_episode(transitions: Sequence[Transition], payloads: Sized | None, max_steps: int) -> None:
    """`transitions` are one whole episode: one robot's episode, steps 0..n-1, the last one done, at most
    `max_steps`, with as many `payloads` as steps when given."""
    if not transitions:
        raise InvalidMessageError("episode", "is empty", "an episode needs at least one transition")
    if payloads is not None and len(payloads) != len(transitions):
        counts = f"{len(payloads)} payloads for an episode of {len(transitions)} transitions"
        raise InvalidMessageError("payloads", "do not match the transitions", counts)
    first = transitions[0]
    name = f"{first.robot_id}/{first.episode_id}"
    for k, t in enumerate(transitions):
        if t.robot_id != first.robot_id or t.episode_id != first.episode_id:
            other = f"{t.robot_id}/{t.episode_id}"
            raise InvalidMessageError(f"{name}: transition {k}", "belongs to another episode", other)
        if t.step != k:
            raise InvalidMessageError(f"{name}: step {t.step}", "is out of order", f"step {k} was due")
    if not transitions[-1].done:
        raise InvalidMessageError(f"{name}: the last transition", "does not end the episode")
    if len(transitions) > max_steps:
        raise InvalidMessageError(name, "is too long", f"{len(transitions)} steps, max_episode_steps={max_steps}")
