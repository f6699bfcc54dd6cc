"""Validation at every door: what a message from outside must satisfy before it is stored, applied or acted on.

One check per message kind, used by every node on both runtimes (a decoded message is the same domain object
on either): `check_transition` (the learner storing, the reward node forwarding), `check_observation` (the
rollout acting), `check_action` (a command a robot would execute, the rollout's own output included),
`check_reward` and `check_press` (rewards and the presses they are made of), `check_episode_event`, and
`check_weights` (policy weights before they are applied or published). The replay buffer admits what
`check_transition` passes (its action space aside) and adds only its own rules across an episode
(`user.buffer.admission`).

A check either returns or raises `InvalidMessageError`, which names the field (a dotted path such as
`next_observation.state`) and the problem; `cause` is the two together, a short stable key for counting
refusals (see `user.interfaces.refusals`). The checks only read: a refused message is never half-used.

Ranges: values are finite and well inside float32 (a state entry beyond `VALUE_LIMIT` or a reward beyond
`REWARD_LIMIT` is a broken sensor or a forged message, and would overflow the learner's float32 maths);
actions lie in the normalised action space [-1, 1] of every robot; ids, steps and versions fit both their
message field and the buffer's index (SQLite integers are signed 64-bit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from user.interfaces.domain import Action, EncodedImage, Observation, Transition
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind

VALUE_LIMIT = 1e9  # largest magnitude of a state entry
REWARD_LIMIT = 1e6  # largest magnitude of a reward (a step's or a press's)
ACTION_BOUNDS = (-1.0, 1.0)  # the normalised action space every robot clips to
ACTION_TOLERANCE = 1e-5  # float32 rounding of a clipped action
EPISODE_ID_MAX = 2**63 - 1  # uint64 on the wire, a signed 64-bit integer in the buffer's index
UINT32_MAX = 2**32 - 1  # step, policy version
UINT16_MAX = 2**16 - 1  # embodiment id
STAMP_MAX_NS = 2**31 * 1_000_000_000 - 1  # builtin_interfaces/Time seconds are int32
NAME_MAX = 256  # robot, camera and policy names
ACTION_SOURCES = (0, 1, 2, 3)  # user/msg/Action SOURCE_POLICY, _HUMAN, _SCRIPTED, _HOLD
PRESS_MODES = (0, 1)  # user/msg/HumanReward MODE_STEP, MODE_EPISODE_END
NUMERIC_KINDS = ("f", "i", "u")  # numpy dtype kinds of a vector of numbers (not bool, text or objects)
IMAGE_FORMATS = ("jpeg", "jpg", "png")  # what a sensor_msgs/CompressedImage format names (e.g. "rgb8; jpeg ...")


class InvalidMessageError(ValueError):
    """A message refused at a door: `field` (dotted path) and `problem` say what was wrong."""

    def __init__(self, field: str, problem: str, detail: str = "") -> None:
        super().__init__(f"{field} {problem}" + (f" ({detail})" if detail else ""))
        self.field = field
        self.problem = problem
        self.detail = detail

    @property
    def cause(self) -> str:
        """What was wrong, without the values: one key per kind of refusal, for counting."""
        return f"{self.field} {self.problem}"


# ---- values ----------------------------------------------------------------------------------------


def check_number(field: str, value: float, limit: float) -> None:
    """`value` is a finite number no larger than `limit` in magnitude."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise InvalidMessageError(field, "is not a number", f"{type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidMessageError(field, "is not finite", f"{value}")
    if abs(value) > limit:
        raise InvalidMessageError(field, "is out of range", f"{value:.6g}, limit {limit:.6g}")


def check_integer(field: str, value: int, high: int, low: int = 0) -> None:
    """`value` is an integer in `[low, high]`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidMessageError(field, "is not an integer", f"{type(value).__name__}")
    if not low <= value <= high:
        raise InvalidMessageError(field, "is out of range", f"{value}, expected {low}..{high}")


def check_name(field: str, value: str) -> None:
    """`value` is a non-empty, printable name of reasonable length."""
    if not isinstance(value, str) or not value:
        raise InvalidMessageError(field, "is empty")
    if len(value) > NAME_MAX or not value.isprintable():
        raise InvalidMessageError(field, "is not a name", f"{value[:40]!r}")


def check_text(field: str, value: str) -> None:
    """`value` is text a message can carry: a string that encodes as UTF-8 (it may be empty)."""
    if not isinstance(value, str):
        raise InvalidMessageError(field, "is not text", f"{type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMessageError(field, "is not UTF-8 text", f"{value[:40]!r}") from None


def check_robot(field: str, value: str, expected: str | None) -> None:
    """`value` is a robot name, and `expected` (the robot whose topic it came on) when that is given."""
    check_name(field, value)
    if expected is not None and value != expected:
        raise InvalidMessageError(field, "names another robot", f"{value[:40]!r}, not {expected!r}")


def check_vector(
    field: str,
    values: Any,
    *,
    limit: float = VALUE_LIMIT,
    length: int | None = None,
    bounds: tuple[float, float] | None = None,
) -> None:
    """`values` is one vector of finite numbers (of `length`, when given) within `limit`, or within `bounds`."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InvalidMessageError(field, "has the wrong shape", f"{arr.shape}, expected a vector")
    if length is not None and arr.shape[0] != length:
        raise InvalidMessageError(field, "has the wrong length", f"{arr.shape[0]}, expected {length}")
    if arr.dtype.kind not in NUMERIC_KINDS:
        raise InvalidMessageError(field, "is not numeric", f"dtype {arr.dtype}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise InvalidMessageError(field, "is not finite", _first(arr, bad))
    low, high = (-limit, limit) if bounds is None else (bounds[0] - ACTION_TOLERANCE, bounds[1] + ACTION_TOLERANCE)
    bad = np.flatnonzero((arr < low) | (arr > high))
    if bad.size:
        lo, hi = (-limit, limit) if bounds is None else bounds
        raise InvalidMessageError(field, "is out of range", f"{_first(arr, bad)}; allowed [{lo:.6g}, {hi:.6g}]")


def _first(arr: np.ndarray, bad: np.ndarray) -> str:
    i = int(bad[0])
    return f"{bad.size} of {arr.size} values, first {arr[i]:.6g} at index {i}"


# ---- messages --------------------------------------------------------------------------------------


def check_image(field: str, image: EncodedImage) -> None:
    """A compressed camera frame: a camera name, a JPEG or PNG format and some bytes."""
    check_name(f"{field}.camera", image.camera)
    if not any(f in image.format.lower() for f in IMAGE_FORMATS):
        raise InvalidMessageError(f"{field}.format", "is not an image format", f"{image.format[:40]!r}")
    if not image.data:
        raise InvalidMessageError(f"{field}.data", "is empty")
    check_integer(f"{field}.stamp_ns", image.stamp_ns, STAMP_MAX_NS)


def check_observation(obs: Observation, *, robot_id: str | None = None, field: str = "observation") -> None:
    """What a robot saw: its robot (the topic's, when given), its task as text, ids, a finite state, named
    consistently, images."""
    check_robot(f"{field}.robot_id", obs.robot_id, robot_id)
    check_text(f"{field}.task", obs.task)
    check_integer(f"{field}.episode_id", obs.episode_id, EPISODE_ID_MAX)
    check_integer(f"{field}.step", obs.step, UINT32_MAX)
    check_integer(f"{field}.stamp_ns", obs.stamp_ns, STAMP_MAX_NS)
    check_integer(f"{field}.policy_version", obs.policy_version, UINT32_MAX)
    check_integer(f"{field}.embodiment_id", obs.embodiment_id, UINT16_MAX)
    check_vector(f"{field}.state", obs.state)
    values, names = np.asarray(obs.state).shape[0], len(obs.state_names)
    if names and names != values:
        raise InvalidMessageError(f"{field}.state_names", "do not match the state", f"{names} for {values}")
    for k, image in enumerate(obs.images):
        check_image(f"{field}.images[{k}]", image)


def check_action(
    action: Action,
    *,
    robot_id: str | None = None,
    dim: int | None = None,
    bounds: tuple[float, float] | None = ACTION_BOUNDS,
    field: str = "action",
) -> None:
    """A command for one step: its robot, ids, a known source, and finite data of `dim` values within `bounds`
    (None: an action space not known here, values within `VALUE_LIMIT`)."""
    check_robot(f"{field}.robot_id", action.robot_id, robot_id)
    check_integer(f"{field}.episode_id", action.episode_id, EPISODE_ID_MAX)
    check_integer(f"{field}.step", action.step, UINT32_MAX)
    check_integer(f"{field}.stamp_ns", action.stamp_ns, STAMP_MAX_NS)
    check_integer(f"{field}.policy_version", action.policy_version, UINT32_MAX)
    check_integer(f"{field}.chunk_seq", action.chunk_seq, UINT32_MAX)
    check_integer(f"{field}.chunk_index", action.chunk_index, UINT32_MAX)
    if action.source not in ACTION_SOURCES:
        raise InvalidMessageError(f"{field}.source", "is unknown", f"{action.source}")
    check_vector(f"{field}.data", action.data, length=dim, bounds=bounds)


def check_reward(value: float, field: str = "reward") -> None:
    """A reward: finite and within `REWARD_LIMIT`."""
    check_number(field, value, REWARD_LIMIT)


def check_transition(
    t: Transition,
    *,
    robot_id: str | None = None,
    action_dim: int | None = None,
    action_bounds: tuple[float, float] | None = ACTION_BOUNDS,
) -> None:
    """One (s, a, r, s') step: both observations and the action valid and of one robot, episode and step
    (the next observation one step on, its state as long), a valid reward, a stamp. `action_bounds` None: the
    action space is not known here (the buffer, which also stores bags' actions in their own units)."""
    obs, nxt = t.observation, t.next_observation
    check_observation(obs, robot_id=robot_id)
    check_observation(nxt, robot_id=obs.robot_id, field="next_observation")
    check_action(t.action, robot_id=obs.robot_id, dim=action_dim, bounds=action_bounds)
    check_reward(t.reward)
    check_integer("stamp_ns", t.stamp_ns, STAMP_MAX_NS)
    _same("action.episode_id", t.action.episode_id, obs.episode_id)
    _same("action.step", t.action.step, obs.step)
    _same("next_observation.episode_id", nxt.episode_id, obs.episode_id)
    _same("next_observation.step", nxt.step, obs.step + 1)
    _same("next_observation.state length", np.asarray(nxt.state).shape[0], np.asarray(obs.state).shape[0])


def _same(field: str, value: int, expected: int) -> None:
    if value != expected:
        raise InvalidMessageError(field, "does not match the transition", f"{value}, expected {expected}")


def check_press(reward: float, mode: int, *, field: str = "press") -> None:
    """A person's reward press: a finite reward within `REWARD_LIMIT` and a known mode."""
    check_number(f"{field}.reward", reward, REWARD_LIMIT)
    if mode not in PRESS_MODES:
        raise InvalidMessageError(f"{field}.mode", "is unknown", f"{mode}")


def check_episode_event(event: EpisodeEvent, *, robot_id: str | None = None) -> None:
    """An episode boundary: its robot (the topic's, when given), a known kind, ids and counts in range."""
    check_robot("event.robot_id", event.robot_id, robot_id)
    if event.kind not in tuple(EpisodeKind):
        raise InvalidMessageError("event.kind", "is unknown", f"{event.kind}")
    check_integer("event.episode_id", event.episode_id, EPISODE_ID_MAX)
    check_integer("event.steps", event.steps, UINT32_MAX)
    check_number("event.episode_return", event.episode_return, REWARD_LIMIT * UINT32_MAX)


# ---- weights ---------------------------------------------------------------------------------------


def check_weights(
    data: Any,
    names: Sequence[str],
    shapes: Sequence[Sequence[int]],
    *,
    expected: tuple[Sequence[str], Sequence[Sequence[int]]] | None = None,
) -> None:
    """Policy weights that may be applied or published: of the `expected` layout (parameter names and shapes),
    as many values as the layout holds, every one finite. `data` is the flat vector: a torch tensor of any
    float dtype (bfloat16 included) or a numpy array; it is only read."""
    if expected is not None and (tuple(names), _shapes(shapes)) != (tuple(expected[0]), _shapes(expected[1])):
        raise InvalidMessageError("weights", "do not fit the policy", "parameter names or shapes differ")
    sizes = [math.prod(s) for s in shapes]
    numel = int(data.numel()) if hasattr(data, "numel") and callable(data.numel) else int(np.asarray(data).size)
    if numel != sum(sizes):
        raise InvalidMessageError("weights", "have the wrong size", f"{numel} values for a layout of {sum(sizes)}")
    finite = np.asarray(data.isfinite() if hasattr(data, "isfinite") else np.isfinite(np.asarray(data)))
    bad = np.flatnonzero(~finite)
    if bad.size:
        at = int(bad[0])
        owner = int(np.searchsorted(np.cumsum(sizes), at, side="right"))
        raise InvalidMessageError(f"weights.{names[owner]}", "are not finite", f"{bad.size} of {numel} values")


def _shapes(shapes: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in s) for s in shapes)
