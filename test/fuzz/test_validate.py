"""The door checks against anything: transitions, observations and actions with NaN, inf, huge, odd-shaped or
odd-typed values and ids out of every range are either refused with `InvalidMessageError` naming a field of the
message, or accepted, and then they encode, decode back unchanged and hold only finite values that fit float32
and the buffer's signed 64-bit index. Weights are refused exactly when a value is not finite."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from test.buffer import factories as f
from test.fuzz.strategies import CI
from user.interfaces import default_codec
from user.interfaces.domain import EncodedImage, Transition, transition_from_msg, transition_to_msg
from user.interfaces.validate import InvalidMessageError, check_transition, check_weights

CODEC = default_codec()
ROBOT = "arm"
BASE = f.transition(ROBOT, 3, 1, 4)
FIELDS = ("observation", "next_observation", "action", "reward", "stamp_ns")
FLOAT32_MAX = float(np.finfo(np.float32).max)
INT64_MAX = 2**63 - 1

FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
VALUES = st.one_of(
    hnp.arrays(np.float32, st.integers(0, 9), elements=st.floats(width=32)),
    hnp.arrays(np.float64, st.integers(0, 9), elements=FLOATS),
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=3, max_side=3)),
    hnp.arrays(np.int64, st.integers(0, 9)),
    st.just(np.array(["x"] * 7)),
    hnp.arrays(np.float32, 7, elements=st.floats(-1e10, 1e10, width=32)),  # the state's own length
    hnp.arrays(np.float32, f.ACTION_DIM, elements=st.floats(-1.5, 1.5, width=32)),  # the action's
)
IDS = st.one_of(st.integers(-3, 10), st.integers(-(2**64), 2**64), st.just(2**63), st.just(2**32))
NAMES = st.one_of(st.just(ROBOT), st.text(max_size=5), st.just(""), st.just("arm\x00"))
IMAGES = st.builds(
    EncodedImage,
    camera=st.one_of(st.just("wrist"), st.text(max_size=4)),
    format=st.one_of(st.sampled_from(["jpeg", "png", "rgb8; jpeg compressed bgr8"]), st.text(max_size=6)),
    data=st.binary(max_size=8),
    stamp_ns=IDS,
)


OBSERVATION = {
    "state": VALUES,
    "robot_id": NAMES,
    "episode_id": IDS,
    "step": IDS,
    "stamp_ns": IDS,
    "policy_version": IDS,
    "embodiment_id": IDS,
    "images": st.lists(IMAGES, max_size=2).map(tuple),
    "state_names": st.lists(st.text(max_size=3), max_size=8).map(tuple),
}
ACTION = {"data": VALUES, "source": IDS, "episode_id": IDS, "step": IDS, "robot_id": NAMES}
TOP = {"reward": st.one_of(FLOATS, st.just(0.5)), "stamp_ns": IDS}
CHANGES = [("observation", k) for k in OBSERVATION] + [("next_observation", k) for k in OBSERVATION]
CHANGES += [("action", k) for k in ACTION] + [("", k) for k in TOP]


def _strategy(part: str, name: str) -> st.SearchStrategy[Any]:
    return (ACTION if part == "action" else OBSERVATION if part else TOP)[name]


@st.composite
def transitions(draw: st.DrawFn) -> Transition:
    """A valid transition with one to three of its fields replaced by anything."""
    t = replace(BASE, action=replace(BASE.action, data=np.linspace(-1, 1, f.ACTION_DIM, dtype=np.float32)))
    for part, name in draw(st.lists(st.sampled_from(CHANGES), min_size=1, max_size=3, unique=True)):
        value = draw(_strategy(part, name))
        t = replace(t, **{part: replace(getattr(t, part), **{name: value})}) if part else replace(t, **{name: value})
    return t


def _storable(t: Transition) -> None:
    """What the buffer needs of an accepted transition: it encodes and decodes back the same, finite in float32,
    with ids the index can hold."""
    back = transition_from_msg(CODEC.decode(CODEC.encode(transition_to_msg(t, CODEC)), "user/msg/Transition"))
    assert back.robot_id == t.robot_id and back.episode_id == t.episode_id and back.step == t.step
    assert 0 <= back.episode_id <= INT64_MAX and 0 <= back.stamp_ns <= INT64_MAX
    for values in (back.observation.state, back.next_observation.state, back.action.data):
        assert values.ndim == 1 and np.all(np.abs(values) <= FLOAT32_MAX)
    assert np.array_equal(back.observation.state, np.asarray(t.observation.state, np.float32))
    assert np.array_equal(back.action.data, np.asarray(t.action.data, np.float32))
    assert abs(back.reward) <= FLOAT32_MAX and back.reward == np.float32(t.reward)
    assert np.all(np.abs(back.action.data) <= 1.0 + 1e-5)


@CI
@given(t=transitions())
def test_any_transition_is_refused_naming_a_field_or_is_storable(t: Transition) -> None:
    try:
        check_transition(t, robot_id=ROBOT)
    except InvalidMessageError as exc:
        assert exc.field.split(".")[0].split("[")[0] in FIELDS, exc.field
        assert str(exc).startswith(exc.cause)
        event(f"refused: {exc.cause}")
        return
    event("accepted")
    _storable(t)


def test_the_strategy_reaches_both_outcomes() -> None:
    """The base the strategy perturbs passes (so the property above sees acceptances, not only refusals)."""
    t = replace(BASE, action=replace(BASE.action, data=np.linspace(-1, 1, f.ACTION_DIM, dtype=np.float32)))
    check_transition(t, robot_id=ROBOT)
    _storable(t)


@CI
@given(
    values=hnp.arrays(np.float32, st.integers(1, 12), elements=st.floats(width=32, allow_nan=True)),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
)
def test_weights_are_refused_exactly_when_a_value_is_not_finite(values: np.ndarray, dtype: torch.dtype) -> None:
    data = torch.from_numpy(values.copy()).to(dtype)
    shapes = ((int(values.size),),)
    finite = bool(torch.isfinite(data).all())
    try:
        check_weights(data, ("w",), shapes, expected=(("w",), shapes))
    except InvalidMessageError as exc:
        assert not finite and exc.cause == "weights.w are not finite"
        return
    assert finite
