"""What the buffer admits, value by value, at the edges of each range: the door's rules (`check_transition`, one
validator), its action held to the value limit rather than [-1, 1], the index's SQLite integers for wall times,
one shape through an episode, and an episode handed over whole."""

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from test.buffer.factories import episode, transition
from user.buffer.admission import (
    INT64_MAX,
    INT64_MIN,
    check_episode,
    check_fits_episode,
    check_step,
    check_storable,
    check_wall_time,
    check_whole_episode,
    problem_of,
)
from user.buffer.disk.camera_topics import ON_CAMERA_TOPIC
from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.interfaces.domain import Transition
from user.interfaces.validate import (
    REWARD_LIMIT,
    STAMP_MAX_NS,
    UINT32_MAX,
    VALUE_LIMIT,
    InvalidMessageError,
    check_transition,
)

T = transition("arm", 3, 1, 4)
SQLITE = "-9223372036854775808..9223372036854775807"
FLOAT32_MAX = float(np.finfo(np.float32).max)
BEYOND_FLOAT32 = float(np.nextafter(np.float64(FLOAT32_MAX), np.inf))
BEYOND_VALUES = float(np.nextafter(VALUE_LIMIT, np.inf))
BEYOND_REWARDS = float(np.nextafter(REWARD_LIMIT, np.inf))


def _obs(t: Transition, **fields: Any) -> Transition:
    return replace(t, observation=replace(t.observation, **fields))


def _next(t: Transition, **fields: Any) -> Transition:
    return replace(t, next_observation=replace(t.next_observation, **fields))


def _act(t: Transition, **fields: Any) -> Transition:
    return replace(t, action=replace(t.action, **fields))


def _at(t: Transition, *, episode_id: int | None = None, step: int | None = None) -> Transition:
    """`t` moved to another episode id or step, consistently (observation, action and next observation)."""
    e = t.episode_id if episode_id is None else episode_id
    s = t.step if step is None else step
    t = _act(_obs(t, episode_id=e, step=s), episode_id=e, step=s)
    return _next(t, episode_id=e, step=s + 1)


def _states(t: Transition, state: np.ndarray) -> Transition:
    """`t` with `state` as both its state and its next state (they are as long as each other)."""
    return _next(_obs(t, state=state), state=state.copy())


def transition_problem(t: Transition) -> str | None:
    return problem_of(check_storable, t)


def test_a_good_transition_and_episode_pass() -> None:
    assert transition_problem(T) is None
    assert problem_of(check_episode, episode("arm", 0, 3), [1, 2, 3]) is None


@pytest.mark.parametrize(
    ("t", "problem"),
    [
        (_obs(T, episode_id=-1), f"observation.episode_id is out of range (-1, expected 0..{INT64_MAX})"),
        (
            _obs(T, episode_id=INT64_MAX + 1),
            "observation.episode_id is out of range (9223372036854775808, expected 0..9223372036854775807)",
        ),
        (_obs(T, step=-1), "observation.step is out of range (-1, expected 0..4294967295)"),
        (_obs(T, step=UINT32_MAX + 1), "observation.step is out of range (4294967296, expected 0..4294967295)"),
        (_at(T, step=UINT32_MAX), "next_observation.step is out of range (4294967296, expected 0..4294967295)"),
        (_act(T, policy_version=-1), "action.policy_version is out of range (-1, expected 0..4294967295)"),
        (
            _act(T, policy_version=UINT32_MAX + 1),
            "action.policy_version is out of range (4294967296, expected 0..4294967295)",
        ),
        (
            replace(T, stamp_ns=INT64_MIN - 1),
            f"stamp_ns is out of range (-9223372036854775809, expected 0..{STAMP_MAX_NS})",
        ),
        (
            replace(T, stamp_ns=INT64_MAX + 1),
            f"stamp_ns is out of range (9223372036854775808, expected 0..{STAMP_MAX_NS})",
        ),
        (replace(T, stamp_ns=-1), f"stamp_ns is out of range (-1, expected 0..{STAMP_MAX_NS})"),
        (
            replace(T, stamp_ns=STAMP_MAX_NS + 1),
            f"stamp_ns is out of range ({STAMP_MAX_NS + 1}, expected 0..{STAMP_MAX_NS})",
        ),
        (replace(T, reward=float("nan")), "reward is not finite (nan)"),
        (replace(T, reward=-BEYOND_FLOAT32), "reward is out of range (-3.40282e+38, limit 1e+06)"),
        (replace(T, reward=BEYOND_REWARDS), "reward is out of range (1e+06, limit 1e+06)"),
        (_obs(T, robot_id=""), "observation.robot_id is empty"),
        (_obs(T, robot_id="a\udc80"), "observation.robot_id is not a name ('a\\udc80')"),
        (_obs(T, task="t\udc80"), "observation.task is not UTF-8 text ('t\\udc80')"),
        (
            _obs(T, state=np.array([0.0, np.inf])),
            "observation.state is not finite (1 of 2 values, first inf at index 1)",
        ),
        (
            _obs(T, state=np.array([BEYOND_FLOAT32, 0.0])),
            "observation.state is out of range (1 of 2 values, first 3.40282e+38 at index 0; allowed [-1e+09, 1e+09])",
        ),
        (
            _states(T, np.array([0.0, -BEYOND_VALUES])),
            "observation.state is out of range (1 of 2 values, first -1e+09 at index 1; allowed [-1e+09, 1e+09])",
        ),
        (_obs(T, state=np.array(["a", "b"])), "observation.state is not numeric (dtype <U1)"),
        (_obs(T, state=np.zeros((2, 2))), "observation.state has the wrong shape ((2, 2), expected a vector)"),
        (
            _next(T, state=np.array([np.nan])),
            "next_observation.state is not finite (1 of 1 values, first nan at index 0)",
        ),
        (_act(T, data=np.array([0.5, -np.inf])), "action.data is not finite (1 of 2 values, first -inf at index 1)"),
        (
            _act(T, data=np.array([BEYOND_VALUES])),
            "action.data is out of range (1 of 1 values, first 1e+09 at index 0; allowed [-1e+09, 1e+09])",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_value_out_of_its_range_is_named(t: Transition, problem: str) -> None:
    assert transition_problem(t) == problem


@pytest.mark.parametrize(
    "t",
    [
        _at(T, episode_id=0),
        _at(T, episode_id=INT64_MAX),
        _at(T, step=0),
        _at(T, step=UINT32_MAX - 1),  # the last step whose next step fits the message
        _act(T, policy_version=0),
        _act(T, policy_version=UINT32_MAX),
        replace(T, stamp_ns=0),
        replace(T, stamp_ns=STAMP_MAX_NS),
        replace(T, reward=REWARD_LIMIT),
        replace(T, reward=-REWARD_LIMIT),
        _states(T, np.array([VALUE_LIMIT, -VALUE_LIMIT])),
        _states(T, np.array([1, 2], dtype=np.int64)),
        _states(T, np.array([1, 2], dtype=np.uint8)),
        _states(T, np.zeros(0, dtype=np.float32)),
        _act(T, data=np.array([VALUE_LIMIT, -VALUE_LIMIT, 2.0, -7.5])),  # no action space here: the value limit
    ],
)
def test_values_at_the_edge_of_their_range_pass(t: Transition) -> None:
    assert transition_problem(t) is None


@pytest.mark.parametrize(
    ("t", "cause"),
    [
        (_next(T, robot_id="other"), "next_observation.robot_id names another robot"),
        (_act(T, robot_id="other"), "action.robot_id names another robot"),
        (_act(T, step=2), "action.step does not match the transition"),
        (_next(T, step=3), "next_observation.step does not match the transition"),
        (_next(T, episode_id=4), "next_observation.episode_id does not match the transition"),
        (_next(T, state=np.zeros(6, np.float32)), "next_observation.state length does not match the transition"),
        (_obs(T, state_names=("a", "b")), "observation.state_names do not match the state"),
        (_obs(T, embodiment_id=2**16), "observation.embodiment_id is out of range"),
        (_next(T, policy_version=2**32), "next_observation.policy_version is out of range"),
        (_act(T, source=4), "action.source is unknown"),
        (_obs(T, task=None), "observation.task is not text"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_doors_rules_hold_in_the_buffer(t: Transition, cause: str) -> None:
    """What the door refuses, the buffer refuses with the same words (ids consistent, names, sources, images)."""
    with pytest.raises(InvalidMessageError) as info:
        check_storable(t)
    assert info.value.cause == cause


@pytest.mark.parametrize("fmt", [ON_CAMERA_TOPIC, IN_NEXT_STEP])
def test_an_image_in_a_placeholder_format_the_buffer_reserves_is_refused(fmt: str) -> None:
    held = _obs(T, images=(replace(T.observation.images[0], format=fmt),))
    assert transition_problem(held) == (
        f"images are placeholders (observation image of camera 'wrist' has format {fmt!r}, reserved by the buffer)"
    )
    later = _next(T, images=(T.next_observation.images[0], replace(T.next_observation.images[1], format=fmt)))
    assert transition_problem(later) == (
        f"images are placeholders (next observation image of camera 'front' has format {fmt!r}, reserved by the buffer)"
    )
    with pytest.raises(InvalidMessageError) as info:
        check_transition(held)  # the door: no image format either
    assert info.value.cause == "observation.images[0].format is not an image format"


def test_wall_times_are_sqlite_integers() -> None:
    assert problem_of(check_wall_time, INT64_MIN) is None and problem_of(check_wall_time, INT64_MAX) is None
    assert problem_of(check_wall_time, INT64_MAX + 1) == (
        f"wall_ns is out of range (9223372036854775808, expected {SQLITE})"
    )
    assert problem_of(check_wall_time, INT64_MIN - 1) == (
        f"wall_ns is out of range (-9223372036854775809, expected {SQLITE})"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda t: _obs(t, state=np.zeros(6, np.float32)),
            "observation.state changes shape in the episode ((6,), step 0 had (7,))",
        ),
        (
            lambda t: _next(t, state=np.zeros(8, np.float32)),
            "next_observation.state changes shape in the episode ((8,), step 0 had (7,))",
        ),
        (
            lambda t: _act(t, data=np.zeros(3, np.float32)),
            "action.data changes shape in the episode ((3,), step 0 had (4,))",
        ),
    ],
    ids=["state", "next-state", "action"],
)
def test_a_step_of_another_shape_does_not_fit_its_episode(change: object, problem: str) -> None:
    ts = episode("arm", 0, 3)
    assert problem_of(check_fits_episode, ts[0], ts[2]) is None
    odd = change(ts[2])  # type: ignore[operator]
    assert problem_of(check_fits_episode, ts[0], odd) == problem
    assert problem_of(check_step, odd, ts[0], 3) == problem  # named by its episode, before its own lengths
    assert problem_of(check_episode, [*ts[:2], odd], [1, 2, 3]) == f"step 2: {problem}"


def test_a_step_is_checked_against_its_episode_and_wall_time_only_when_they_are_known() -> None:
    ts = episode("arm", 0, 3)
    odd = _act(ts[1], data=np.zeros(3, np.float32))
    assert problem_of(check_step, odd, None, None) is None  # the first step of its episode: no shape to keep
    assert problem_of(check_step, ts[1], ts[0], None) is None
    assert problem_of(check_step, ts[1], ts[0], INT64_MAX + 1) == (
        f"wall_ns is out of range (9223372036854775808, expected {SQLITE})"
    )
    assert problem_of(check_step, replace(ts[1], reward=np.inf), ts[0], 5) == "reward is not finite (inf)"


def test_an_episode_needs_a_wall_time_per_step() -> None:
    assert problem_of(check_episode, episode("arm", 0, 3), [1, 2]) == (
        "wall_ns do not match the steps (2 wall times for 3 steps)"
    )
    assert problem_of(check_episode, episode("arm", 0, 2), [1, 2, 3]) == (
        "wall_ns do not match the steps (3 wall times for 2 steps)"
    )


def test_an_episode_names_the_first_step_with_a_problem() -> None:
    ts = episode("arm", 0, 4)
    ts[1] = replace(ts[1], reward=float("inf"))
    ts[3] = replace(ts[3], reward=float("nan"))
    assert problem_of(check_episode, ts, [1, 2, 3, 4]) == "step 1: reward is not finite (inf)"
    assert problem_of(check_episode, episode("arm", 0, 2), [1, INT64_MAX + 1]) == (
        f"step 1: wall_ns is out of range (9223372036854775808, expected {SQLITE})"
    )
    with pytest.raises(InvalidMessageError) as info:
        check_episode(ts, [1, 2, 3, 4])
    assert (info.value.field, info.value.problem, info.value.detail) == ("step 1: reward", "is not finite", "inf")


def test_a_whole_episode_fits_exactly_max_steps() -> None:
    assert problem_of(check_whole_episode, episode("arm", 0, 3), None, 3) is None
    assert problem_of(check_whole_episode, episode("arm", 0, 3), [b"", b"", b""], 3) is None
    assert problem_of(check_whole_episode, episode("arm", 0, 3), [b""], 3) == (
        "payloads do not match the transitions (1 payloads for an episode of 3 transitions)"
    )
    assert problem_of(check_whole_episode, episode("arm", 0, 4), None, 3) == (
        "arm/0 is too long (4 steps, max_episode_steps=3)"
    )
