"""What the buffer admits: every value and id of a transition is checked before any of its bytes are written.

The index needs ids and stamps in SQLite's integer range and finite rewards (SQLite stores NaN as NULL, which
its NOT NULL columns refuse only after the segment has the records); the stored message (float32 fields) and
training need rewards, states, next states and actions that are finite as float32, of one shape through an
episode. A message that fails here is refused whole, with the reason; the segment and the index stay as they
were. (Episode returns then stay finite too: at most max_episode_steps float32 values are summed.)
"""

from __future__ import annotations

from collections.abc import Sequence, Sized

import numpy as np

from user.buffer.camera_topics import image_problem
from user.interfaces.domain import Transition

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # SQLite INTEGER
UINT32_MAX = 2**32 - 1  # step and policy version fields of the stored message
FLOAT32_MAX = float(np.finfo(np.float32).max)  # beyond it a stored float32 field is inf
NUMERIC_KINDS = ("f", "i", "u")  # numpy dtype kinds a stored float32 vector can come from
ARRAYS = ("state", "next state", "action")  # the vectors of a transition, as problems name them


def _text_problem(name: str, text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{name} {text!r} is not valid UTF-8 text"
    return None


def _int_problem(name: str, value: int, low: int, high: int = INT64_MAX) -> str | None:
    if not low <= int(value) <= high:
        return f"{name} {value} is outside [{low}, {high}]"
    return None


def _array_problem(name: str, values: object) -> str | None:
    array = np.asarray(values)
    if array.dtype.kind not in NUMERIC_KINDS:
        return f"{name} is not numeric (dtype {array.dtype})"
    if array.ndim != 1:
        return f"{name} has shape {array.shape}, expected a vector"
    bad = np.flatnonzero(~(np.abs(array) <= FLOAT32_MAX))  # NaN compares False
    if bad.size:
        return f"{name}[{int(bad[0])}] is {array[bad[0]]} (not finite as float32)"
    return None


def _reward_problem(reward: float) -> str | None:
    if not abs(float(reward)) <= FLOAT32_MAX:
        return f"reward is {reward} (not finite as float32)"
    return None


def transition_problem(t: Transition) -> str | None:
    """Why `t` cannot be stored (its ids, stamps, reward, state, next state or action), or None."""
    if not t.robot_id:
        return "no robot id"
    return (
        _text_problem("robot id", t.robot_id)
        or _text_problem("task", t.task)
        or _int_problem("episode id", t.episode_id, 0)
        or _int_problem("step", t.step, 0, UINT32_MAX)
        or _int_problem("policy version", t.action.policy_version, 0, UINT32_MAX)
        or _int_problem("stamp", t.stamp_ns, INT64_MIN)
        or _reward_problem(t.reward)
        or _array_problem("state", t.observation.state)
        or _array_problem("next state", t.next_observation.state)
        or _array_problem("action", t.action.data)
        or image_problem(t)
    )


def _shapes(t: Transition) -> dict[str, tuple[int, ...]]:
    return {
        "state": np.shape(t.observation.state),
        "next state": np.shape(t.next_observation.state),
        "action": np.shape(t.action.data),
    }


def shape_problem(first: Transition, t: Transition) -> str | None:
    """Why `t` does not fit the episode that `first` began (state, next state and action shapes), or None."""
    want, got = _shapes(first), _shapes(t)
    for name in ARRAYS:
        if want[name] != got[name]:
            return f"{name} has shape {got[name]}, step {first.step} had {want[name]}"
    return None


def wall_problem(wall_ns: int) -> str | None:
    """Why `wall_ns` cannot be a stored wall time, or None."""
    return _int_problem("wall time", wall_ns, INT64_MIN)


def episode_problem(transitions: Sequence[Transition], wall_ns: Sequence[int]) -> str | None:
    """Why the episode `transitions` (received at `wall_ns`) cannot be stored, or None: any step's problem
    (named by its step), steps of different shapes, a wall time out of range."""
    if len(wall_ns) != len(transitions):
        return f"{len(wall_ns)} wall times for {len(transitions)} steps"
    for k, t in enumerate(transitions):
        problem = transition_problem(t) or shape_problem(transitions[0], t) or wall_problem(wall_ns[k])
        if problem is not None:
            return f"step {t.step}: {problem}"
    return None


def whole_episode_problem(transitions: Sequence[Transition], payloads: Sized | None, max_steps: int) -> str | None:
    """Why `transitions` are not one whole episode (one robot's episode, steps 0..n-1, the last one done, at most
    `max_steps`, with as many `payloads` as steps when given), or None."""
    if not transitions:
        return "an episode needs at least one transition"
    if payloads is not None and len(payloads) != len(transitions):
        return f"{len(payloads)} payloads for an episode of {len(transitions)} transitions"
    first = transitions[0]
    name = f"{first.robot_id}/{first.episode_id}"
    for k, t in enumerate(transitions):
        if t.robot_id != first.robot_id or t.episode_id != first.episode_id:
            return f"{name}: transition {k} belongs to {t.robot_id}/{t.episode_id}"
        if t.step != k:
            return f"{name}: step {t.step} where step {k} was due"
    if not transitions[-1].done:
        return f"{name}: the last transition does not end the episode"
    if len(transitions) > max_steps:
        return f"{name}: longer than max_episode_steps={max_steps}"
    return None
