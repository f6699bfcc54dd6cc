"""The door checks, one message kind at a time: what passes, and for what is refused, the field and the problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from test.buffer import factories as f
from user.interfaces.domain import Action, EncodedImage, Transition
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind
from user.interfaces.validate import (
    EPISODE_ID_MAX,
    InvalidMessageError,
    check_action,
    check_episode_event,
    check_integer,
    check_number,
    check_observation,
    check_press,
    check_reward,
    check_transition,
    check_vector,
    check_weights,
)

ROBOT = "arm"


def _transition(**changes: Any) -> Transition:
    t = f.transition(ROBOT, 3, 1, 4)
    return replace(t, action=replace(t.action, data=np.full(f.ACTION_DIM, 0.5, np.float32)), **changes)


T = _transition()
Change = Callable[[Transition], Transition]


def _obs(**changes: Any) -> Change:
    return lambda t: replace(t, observation=replace(t.observation, **changes))


def _next(**changes: Any) -> Change:
    return lambda t: replace(t, next_observation=replace(t.next_observation, **changes))


def _act(**changes: Any) -> Change:
    return lambda t: replace(t, action=replace(t.action, **changes))


def _episode(episode_id: int) -> Change:
    def change(t: Transition) -> Transition:
        obs, nxt = replace(t.observation, episode_id=episode_id), replace(t.next_observation, episode_id=episode_id)
        return replace(t, observation=obs, action=replace(t.action, episode_id=episode_id), next_observation=nxt)

    return change


def _image(**changes: Any) -> Change:
    return lambda t: replace(
        t, observation=replace(t.observation, images=(replace(t.observation.images[0], **changes),))
    )


NAN = float("nan")
REFUSED: list[tuple[str, Change, str]] = [  # (id, change to a valid transition, expected cause)
    ("state nan", _obs(state=np.array([0, NAN, 0, 0, 0, 0, 0], np.float32)), "observation.state is not finite"),
    ("state inf", _obs(state=np.full(7, np.inf, np.float32)), "observation.state is not finite"),
    ("state huge", _obs(state=np.full(7, 1e10, np.float32)), "observation.state is out of range"),
    ("state 2-d", _obs(state=np.zeros((7, 1), np.float32)), "observation.state has the wrong shape"),
    ("state text", _obs(state=np.array(["a"] * 7)), "observation.state is not numeric"),
    ("next state nan", _next(state=np.full(7, NAN, np.float32)), "next_observation.state is not finite"),
    ("next state shorter", _next(state=np.zeros(6, np.float32)), "next_observation.state length does not match "
     "the transition"),
    ("state names", _obs(state_names=("a", "b")), "observation.state_names do not match the state"),
    ("robot empty", _obs(robot_id=""), "observation.robot_id is empty"),
    ("robot control", _obs(robot_id="arm\x00"), "observation.robot_id is not a name"),
    ("robot other", _obs(robot_id="franka_right"), "observation.robot_id names another robot"),
    ("task not utf-8", _obs(task="peg\udc80"), "observation.task is not UTF-8 text"),
    ("task not text", _obs(task=b"peg"), "observation.task is not text"),
    ("next task not utf-8", _next(task="\ud800"), "next_observation.task is not UTF-8 text"),
    ("next robot other", _next(robot_id="franka_right"), "next_observation.robot_id names another robot"),
    ("action robot other", _act(robot_id="franka_right"), "action.robot_id names another robot"),
    ("episode negative", _episode(-1), "observation.episode_id is out of range"),
    ("episode beyond sqlite", _obs(episode_id=2**63), "observation.episode_id is out of range"),
    ("step beyond uint32", _obs(step=2**32), "observation.step is out of range"),
    ("step negative", _obs(step=-1), "observation.step is out of range"),
    ("stamp negative", _obs(stamp_ns=-1), "observation.stamp_ns is out of range"),
    ("version beyond uint32", _obs(policy_version=2**32), "observation.policy_version is out of range"),
    ("embodiment beyond uint16", _obs(embodiment_id=2**16), "observation.embodiment_id is out of range"),
    ("image format", _image(format="bmp"), "observation.images[0].format is not an image format"),
    ("image empty", _image(data=b""), "observation.images[0].data is empty"),
    ("image camera", _image(camera=""), "observation.images[0].camera is empty"),
    ("action nan", _act(data=np.full(4, NAN, np.float32)), "action.data is not finite"),
    ("action beyond 1", _act(data=np.array([0, 1.01, 0, 0], np.float32)), "action.data is out of range"),
    ("action below -1", _act(data=np.array([-1.01, 0, 0, 0], np.float32)), "action.data is out of range"),
    ("action length", _act(data=np.zeros(3, np.float32)), "action.data has the wrong length"),
    ("action source", _act(source=4), "action.source is unknown"),
    ("action episode", _act(episode_id=4), "action.episode_id does not match the transition"),
    ("action step", _act(step=2), "action.step does not match the transition"),
    ("next episode", _next(episode_id=4), "next_observation.episode_id does not match the transition"),
    ("next step", _next(step=1), "next_observation.step does not match the transition"),
    ("reward nan", lambda t: replace(t, reward=NAN), "reward is not finite"),
    ("reward inf", lambda t: replace(t, reward=-float("inf")), "reward is not finite"),
    ("reward huge", lambda t: replace(t, reward=1e7), "reward is out of range"),
    ("transition stamp", lambda t: replace(t, stamp_ns=2**62), "stamp_ns is out of range"),
]  # fmt: skip


def test_a_valid_transition_passes() -> None:
    check_transition(T, robot_id=ROBOT, action_dim=f.ACTION_DIM)
    check_transition(T)  # without the topic's robot or the policy's dimension
    edge = _act(data=np.array([-1.0, 1.0, 1.0 + 1e-6, -1.0 - 1e-6], np.float32))(T)  # float32 rounding of a clip
    check_transition(edge, robot_id=ROBOT)


@pytest.mark.parametrize(("change", "cause"), [pytest.param(c, cause, id=i) for i, c, cause in REFUSED])
def test_a_refused_transition_names_its_field_and_problem(change: Change, cause: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        check_transition(change(T), robot_id=ROBOT, action_dim=f.ACTION_DIM)
    assert info.value.cause == cause
    assert str(info.value).startswith(cause)


def test_the_error_says_which_values_are_bad() -> None:
    bad = _obs(state=np.array([0, 0, NAN, np.inf, 0, 0, 0], np.float32))(T)
    with pytest.raises(
        InvalidMessageError, match=r"^observation\.state is not finite \(2 of 7 values, first nan at index 2\)$"
    ):
        check_observation(bad.observation)
    with pytest.raises(InvalidMessageError, match=r"^reward is out of range \(2e\+06, limit 1e\+06\)$"):
        check_reward(2e6)
    error = InvalidMessageError("a.b", "is odd", "3")
    assert (error.field, error.problem, error.detail, error.cause, str(error)) == (
        "a.b",
        "is odd",
        "3",
        "a.b is odd",
        "a.b is odd (3)",
    )
    assert str(InvalidMessageError("a", "is empty")) == "a is empty"


def test_png_and_ros_compressed_formats_are_images() -> None:
    for fmt in ("png", "JPEG", "rgb8; jpeg compressed bgr8", "jpg"):
        check_observation(_image(format=fmt)(T).observation)


def test_actions_as_commands() -> None:
    action = Action(ROBOT, 2, 0, np.zeros(7, np.float32))
    check_action(action, robot_id=ROBOT, dim=7)
    with pytest.raises(InvalidMessageError, match=r"^action\.data has the wrong length \(7, expected 6\)$"):
        check_action(action, dim=6)
    wide = replace(action, data=np.full(7, 3.0, np.float32))
    check_action(wide, bounds=(-5.0, 5.0))  # a known wider range
    with pytest.raises(InvalidMessageError, match=r"allowed \[-1, 1\]"):
        check_action(wide)
    with pytest.raises(InvalidMessageError, match="names another robot"):
        check_action(action, robot_id="other")
    check_action(replace(action, data=np.full(7, 1e9, np.float32)), bounds=None)  # no action space known here
    with pytest.raises(InvalidMessageError, match=r"allowed \[-1e\+09, 1e\+09\]\)$"):
        check_action(replace(action, data=np.full(7, 2e9, np.float32)), bounds=None)


def test_a_transition_without_an_action_space_holds_its_action_to_the_value_limit() -> None:
    wide = _act(data=np.array([3.0, -1e9, 0, 0], np.float32))(T)
    check_transition(wide, action_bounds=None)
    with pytest.raises(InvalidMessageError, match=r"^action\.data is out of range .*allowed \[-1, 1\]\)$"):
        check_transition(wide)
    with pytest.raises(InvalidMessageError, match=r"^action\.data is not finite"):
        check_transition(_act(data=np.array([NAN, 0, 0, 0], np.float32))(T), action_bounds=None)


def test_a_task_is_any_text_the_empty_one_included() -> None:
    check_observation(replace(T.observation, task=""))
    check_observation(replace(T.observation, task="peg insertion, ä ✓"))
    with pytest.raises(InvalidMessageError, match=r"^observation\.task is not UTF-8 text \('a\\udc80'\)$"):
        check_observation(replace(T.observation, task="a\udc80"))
    long = "x" * 40
    with pytest.raises(InvalidMessageError, match=rf"^observation\.task is not UTF-8 text \('{long}'\)$"):
        check_observation(replace(T.observation, task=long + "\udc80"))  # the first 40 characters are shown
    with pytest.raises(InvalidMessageError, match=r"^observation\.task is not text \(bytes\)$"):
        check_observation(_obs(task=b"peg")(T).observation)


def test_numbers_and_integers() -> None:
    check_number("x", 3, 10.0)
    check_number("x", np.float32(-2.5), 10.0)
    for value, problem in (
        (True, "is not a number"),
        ("1", "is not a number"),
        (NAN, "is not finite"),
        (11.0, "is out of range"),
    ):
        with pytest.raises(InvalidMessageError) as info:
            check_number("x", value, 10.0)  # type: ignore[arg-type]
        assert info.value.problem == problem
    check_integer("n", np.uint64(EPISODE_ID_MAX), EPISODE_ID_MAX)
    for bad in (True, 1.0, -1, EPISODE_ID_MAX + 1):
        with pytest.raises(InvalidMessageError):
            check_integer("n", bad, EPISODE_ID_MAX)  # type: ignore[arg-type]


def test_vectors_within_limits_or_bounds() -> None:
    check_vector("v", np.array([1e9, -1e9]))
    check_vector("v", np.array([1, 2], np.int64), length=2)
    check_vector("v", [], length=0)
    with pytest.raises(
        InvalidMessageError,
        match=r"^v is out of range \(1 of 2 values, first 2e\+09 at index 1; allowed \[-1e\+09, 1e\+09\]\)$",
    ):
        check_vector("v", np.array([0, 2e9]))
    with pytest.raises(InvalidMessageError, match="allowed"):
        check_vector("v", np.array([0.5]), bounds=(0.0, 0.25))


def test_presses() -> None:
    check_press(1.0, 0)
    check_press(-1.0, 1)
    for reward, mode, cause in (
        (NAN, 0, "press.reward is not finite"),
        (1e9, 0, "press.reward is out of range"),
        (1.0, 2, "press.mode is unknown"),
    ):
        with pytest.raises(InvalidMessageError) as info:
            check_press(reward, mode)
        assert info.value.cause == cause


END = EpisodeEvent(ROBOT, "peg", 4, EpisodeKind.END, 10, steps=12, episode_return=3.0)


def test_episode_events() -> None:
    end = END
    check_episode_event(end, robot_id=ROBOT)
    cases = [
        (replace(end, robot_id="other"), "event.robot_id names another robot"),
        (replace(end, episode_id=-1), "event.episode_id is out of range"),
        (replace(end, steps=2**32), "event.steps is out of range"),
        (replace(end, episode_return=NAN), "event.episode_return is not finite"),
        (replace(end, kind=7), "event.kind is unknown"),  # type: ignore[arg-type]
    ]
    for event, cause in cases:
        with pytest.raises(InvalidMessageError) as info:
            check_episode_event(event, robot_id=ROBOT)
        assert info.value.cause == cause


NAMES = ("w", "b")
SHAPES = ((3, 2), (2,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_weights_finite_and_of_the_expected_layout(dtype: torch.dtype) -> None:
    data = torch.arange(8, dtype=dtype)
    check_weights(data, NAMES, SHAPES, expected=(NAMES, SHAPES))
    check_weights(data.numpy() if dtype != torch.bfloat16 else data.float().numpy(), NAMES, SHAPES)
    data[6] = float("inf")  # the first value of "b"
    with pytest.raises(InvalidMessageError, match=r"^weights\.b are not finite \(1 of 8 values\)$"):
        check_weights(data, NAMES, SHAPES)
    data[5] = float("nan")  # the last value of "w": the first bad one names its parameter
    with pytest.raises(InvalidMessageError, match=r"^weights\.w are not finite \(2 of 8 values\)$"):
        check_weights(data, NAMES, SHAPES)


def test_weights_of_another_layout_or_size_are_refused() -> None:
    data = torch.zeros(8)
    for expected in (("w", "c"), SHAPES), (NAMES, ((2, 3), (2,))), (NAMES, ((3, 2),)):
        with pytest.raises(InvalidMessageError, match=r"^weights do not fit the policy"):
            check_weights(data, NAMES, SHAPES, expected=expected)
    check_weights(data, NAMES, [[3, 2], [2]], expected=(list(NAMES), SHAPES))  # lists or tuples alike
    with pytest.raises(InvalidMessageError, match=r"^weights have the wrong size \(9 values for a layout of 8\)$"):
        check_weights(torch.zeros(9), NAMES, SHAPES)


def test_images_must_say_what_they_are() -> None:
    image = EncodedImage("wrist", "jpeg", b"\xff\xd8", 5)
    check_observation(replace(T.observation, images=(image,)))
    with pytest.raises(InvalidMessageError, match=r"^observation\.images\[0\]\.stamp_ns is out of range"):
        check_observation(replace(T.observation, images=(replace(image, stamp_ns=-5),)))


def test_every_refusal_says_what_it_saw() -> None:
    """The detail is part of the one log line an operator reads: the value, the robot, the expected range."""
    long_name = "r" * 60
    cases: list[tuple[Callable[[], None], str]] = [
        (lambda: check_transition(_obs(robot_id=long_name)(T), robot_id=ROBOT),
         f"observation.robot_id names another robot ({'r' * 40!r}, not 'arm')"),
        (lambda: check_action(replace(T.action, robot_id=long_name), robot_id=ROBOT),
         f"action.robot_id names another robot ({'r' * 40!r}, not 'arm')"),
        (lambda: check_observation(_obs(robot_id="x\x01" + long_name)(T).observation),
         f"observation.robot_id is not a name ({('x' + chr(1) + long_name)[:40]!r})"),
        (lambda: check_observation(_image(format="b" * 50)(T).observation),
         f"observation.images[0].format is not an image format ({'b' * 40!r})"),
        (lambda: check_transition(_act(source=9)(T)), "action.source is unknown (9)"),
        (lambda: check_transition(_next(step=5)(T)),
         "next_observation.step does not match the transition (5, expected 2)"),
        (lambda: check_transition(_obs(state_names=("a",))(T)),
         "observation.state_names do not match the state (1 for 7)"),
        (lambda: check_transition(_obs(state=np.zeros((2, 2)))(T)),
         "observation.state has the wrong shape ((2, 2), expected a vector)"),
        (lambda: check_transition(_obs(state=np.array([True] * 7))(T)),
         "observation.state is not numeric (dtype bool)"),
        (lambda: check_integer("n", 1.5, 10), "n is not an integer (float)"),  # type: ignore[arg-type]
        (lambda: check_integer("n", 11, 10, 2), "n is out of range (11, expected 2..10)"),
        (lambda: check_number("x", True, 1.0), "x is not a number (bool)"),
        (lambda: check_number("x", NAN, 1.0), "x is not finite (nan)"),
        (lambda: check_press(1.0, 3), "press.mode is unknown (3)"),
        (lambda: check_episode_event(replace(END, robot_id=long_name), robot_id=ROBOT),
         f"event.robot_id names another robot ({'r' * 40!r}, not 'arm')"),
        (lambda: check_episode_event(replace(END, kind=5)), "event.kind is unknown (5)"),  # type: ignore[arg-type]
        (lambda: check_weights(torch.zeros(8), NAMES, SHAPES, expected=(NAMES, ((8,),))),
         "weights do not fit the policy (parameter names or shapes differ)"),
    ]  # fmt: skip
    for check, message in cases:
        with pytest.raises(InvalidMessageError) as info:
            check()
        assert str(info.value) == message


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_act(episode_id=-1), "action.episode_id"),
        (_act(step=2**32), "action.step"),
        (_act(stamp_ns=-1), "action.stamp_ns"),
        (_act(policy_version=-1), "action.policy_version"),
        (_act(robot_id=""), "action.robot_id"),
        (_next(step=2**32), "next_observation.step"),
    ],
)
def test_each_action_and_next_observation_field_is_named(change: Change, field: str) -> None:
    with pytest.raises(InvalidMessageError) as info:
        check_transition(change(T))
    assert info.value.field == field


def test_limits_are_inclusive() -> None:
    check_reward(1e6)
    check_reward(-1e6)
    check_observation(_obs(robot_id="r" * 256)(T).observation)
    with pytest.raises(InvalidMessageError, match="is not a name"):
        check_observation(_obs(robot_id="r" * 257)(T).observation)
    check_observation(_obs(state_names=tuple("abcdefg"))(T).observation)  # as many names as values
    with pytest.raises(InvalidMessageError, match=r"^event\.robot_id is empty$"):
        check_episode_event(replace(END, robot_id=""))


def test_a_wider_action_range_reaches_the_action_check() -> None:
    wide = _act(data=np.full(f.ACTION_DIM, 3.0, np.float32))(T)
    check_transition(wide, action_bounds=(-5.0, 5.0))
    with pytest.raises(InvalidMessageError, match=r"allowed \[-2, 2\]"):
        check_transition(wide, action_bounds=(-2.0, 2.0))
