"""What the buffer admits, value by value, at the edges of each range: the index's SQLite integers, the stored
message's uint32 and float32 fields, finite numbers, one shape through an episode."""

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from test.buffer.factories import episode, transition
from user.buffer.admission import (
    FLOAT32_MAX,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    episode_problem,
    shape_problem,
    transition_problem,
    wall_problem,
)
from user.interfaces.domain import Transition

T = transition("arm", 3, 1, 4)
SQLITE = "[-9223372036854775808, 9223372036854775807]"
BEYOND_FLOAT32 = float(np.nextafter(np.float64(FLOAT32_MAX), np.inf))


def _obs(t: Transition, **fields: Any) -> Transition:
    return replace(t, observation=replace(t.observation, **fields))


def _act(t: Transition, **fields: Any) -> Transition:
    return replace(t, action=replace(t.action, **fields))


def test_a_good_transition_and_episode_pass() -> None:
    assert transition_problem(T) is None
    assert episode_problem(episode("arm", 0, 3), [1, 2, 3]) is None


@pytest.mark.parametrize(
    ("t", "problem"),
    [
        (_obs(T, episode_id=-1), "episode id -1 is outside [0, 9223372036854775807]"),
        (_obs(T, episode_id=INT64_MAX + 1), "episode id 9223372036854775808 is outside [0, 9223372036854775807]"),
        (_obs(T, step=-1), "step -1 is outside [0, 4294967295]"),
        (_obs(T, step=UINT32_MAX + 1), "step 4294967296 is outside [0, 4294967295]"),
        (_act(T, policy_version=-1), "policy version -1 is outside [0, 4294967295]"),
        (_act(T, policy_version=UINT32_MAX + 1), "policy version 4294967296 is outside [0, 4294967295]"),
        (replace(T, stamp_ns=INT64_MIN - 1), f"stamp -9223372036854775809 is outside {SQLITE}"),
        (replace(T, stamp_ns=INT64_MAX + 1), f"stamp 9223372036854775808 is outside {SQLITE}"),
        (replace(T, reward=float("nan")), "reward is nan (not finite as float32)"),
        (replace(T, reward=-BEYOND_FLOAT32), f"reward is {-BEYOND_FLOAT32} (not finite as float32)"),
        (_obs(T, robot_id=""), "no robot id"),
        (_obs(T, robot_id="a\udc80"), "robot id 'a\\udc80' is not valid UTF-8 text"),
        (_obs(T, task="t\udc80"), "task 't\\udc80' is not valid UTF-8 text"),
        (_obs(T, state=np.array([0.0, np.inf])), "state[1] is inf (not finite as float32)"),
        (_obs(T, state=np.array([BEYOND_FLOAT32, 0.0])), f"state[0] is {BEYOND_FLOAT32} (not finite as float32)"),
        (_obs(T, state=np.array(["a", "b"])), "state is not numeric (dtype <U1)"),
        (_obs(T, state=np.zeros((2, 2))), "state has shape (2, 2), expected a vector"),
        (
            replace(T, next_observation=replace(T.next_observation, state=np.array([np.nan]))),
            "next state[0] is nan (not finite as float32)",
        ),
        (_act(T, data=np.array([0.5, -np.inf])), "action[1] is -inf (not finite as float32)"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_value_out_of_its_range_is_named(t: Transition, problem: str) -> None:
    assert transition_problem(t) == problem


@pytest.mark.parametrize(
    "t",
    [
        _obs(T, episode_id=0),
        _obs(T, episode_id=INT64_MAX),
        _obs(T, step=0),
        _obs(T, step=UINT32_MAX),
        _act(T, policy_version=0),
        _act(T, policy_version=UINT32_MAX),
        replace(T, stamp_ns=INT64_MIN),
        replace(T, stamp_ns=INT64_MAX),
        replace(T, reward=FLOAT32_MAX),
        replace(T, reward=-FLOAT32_MAX),
        _obs(T, state=np.array([FLOAT32_MAX, -FLOAT32_MAX])),
        _obs(T, state=np.array([1, 2], dtype=np.int64)),
        _obs(T, state=np.array([1, 2], dtype=np.uint8)),
        _obs(T, state=np.zeros(0, dtype=np.float32)),
    ],
)
def test_values_at_the_edge_of_their_range_pass(t: Transition) -> None:
    assert transition_problem(t) is None


def test_wall_times_are_sqlite_integers() -> None:
    assert wall_problem(INT64_MIN) is None and wall_problem(INT64_MAX) is None
    assert (
        wall_problem(INT64_MAX + 1)
        == "wall time 9223372036854775808 is outside [-9223372036854775808, 9223372036854775807]"
    )
    assert (
        wall_problem(INT64_MIN - 1)
        == "wall time -9223372036854775809 is outside [-9223372036854775808, 9223372036854775807]"
    )


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda t: _obs(t, state=np.zeros(6, np.float32)), "state has shape (6,), step 0 had (7,)"),
        (
            lambda t: replace(t, next_observation=replace(t.next_observation, state=np.zeros(8, np.float32))),
            "next state has shape (8,), step 0 had (7,)",
        ),
        (lambda t: _act(t, data=np.zeros(3, np.float32)), "action has shape (3,), step 0 had (4,)"),
    ],
    ids=["state", "next-state", "action"],
)
def test_a_step_of_another_shape_does_not_fit_its_episode(change: object, problem: str) -> None:
    ts = episode("arm", 0, 3)
    assert shape_problem(ts[0], ts[2]) is None
    odd = change(ts[2])  # type: ignore[operator]
    assert shape_problem(ts[0], odd) == problem
    assert episode_problem([*ts[:2], odd], [1, 2, 3]) == f"step 2: {problem}"


def test_an_episode_needs_a_wall_time_per_step() -> None:
    assert episode_problem(episode("arm", 0, 3), [1, 2]) == "2 wall times for 3 steps"
    assert episode_problem(episode("arm", 0, 2), [1, 2, 3]) == "3 wall times for 2 steps"


def test_an_episode_names_the_first_step_with_a_problem() -> None:
    ts = episode("arm", 0, 4)
    ts[1] = replace(ts[1], reward=float("inf"))
    ts[3] = replace(ts[3], reward=float("nan"))
    assert episode_problem(ts, [1, 2, 3, 4]) == "step 1: reward is inf (not finite as float32)"
    assert episode_problem(episode("arm", 0, 2), [1, INT64_MAX + 1]) == (
        f"step 1: wall time 9223372036854775808 is outside {SQLITE}"
    )
