"""The rollout's ROS-free core without any bus (`user.acting.session`): it acts only once weights are here, answers
robots together with one forward pass per version, keeps each robot on its episode's version, acts at random
while the learner warms up, refuses what is not valid on the way in and out, and in sync mode says when a robot
may be reset."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch

from test.acting.helpers import ACTION_DIM, STATE_DIM, Weights, learning, observation
from test.conftest import wait_until
from user.acting.config import ActingConfig
from user.acting.session import ActingSession
from user.interfaces.domain import Action
from user.policies.gaussian import GaussianPolicy
from user.robot_loop.gate import SOURCE_POLICY

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0


class Rig:
    """A session, the weights it acts with and the actions it sent."""

    def __init__(self, **config: Any) -> None:
        self.weights = Weights()
        self.sent: list[Action] = []
        acting = ActingConfig(learning=learning(), **config)
        self.session = ActingSession(acting, self.weights, self.sent.append, rng=np.random.default_rng(0))

    def act(self, *observations: Any) -> list[Action]:
        """Queue `observations` and answer them in one pass; the actions that pass sent."""
        before = len(self.sent)
        for obs in observations:
            self.session.observe(obs.robot_id, obs)
        self.session.act_pending(0.0)
        return self.sent[before:]


def test_nothing_is_answered_before_the_first_weights() -> None:
    rig = Rig()
    assert rig.act(observation("a")) == [] and rig.session.skipped == 1
    rig.weights.publish(1)
    (action,) = rig.act(observation("a", step=1))
    assert (action.robot_id, action.episode_id, action.step, action.policy_version) == ("a", 0, 1, 1)
    assert action.source == SOURCE_POLICY and not action.intervened and action.stamp_ns == 1_001
    assert action.data.dtype == np.float32 and action.data.shape == (ACTION_DIM,)
    assert np.all(np.abs(action.data) <= 1.0) and rig.session.answered == 1


def test_without_wait_for_weights_the_initial_policy_acts() -> None:
    rig = Rig(wait_for_weights=False)
    (action,) = rig.act(observation("a"))
    assert action.policy_version == 0


def test_robots_on_one_version_share_one_forward_pass() -> None:
    rig = Rig()
    rig.weights.publish(1)
    actions = rig.act(observation("a"), observation("b"), observation("c"))
    assert sorted(a.robot_id for a in actions) == ["a", "b", "c"]
    assert list(rig.session.batch_sizes) == [3] and rig.session.mean_batch() == 3.0


def test_each_robot_keeps_its_episode_s_version_and_versions_are_batched_apart() -> None:
    rig = Rig(deterministic=True)
    rig.weights.publish(1)
    rig.act(observation("a"))
    rig.weights.publish(2)
    actions = {a.robot_id: a for a in rig.act(observation("a", step=1), observation("b"))}
    assert actions["a"].policy_version == 1 and actions["b"].policy_version == 2  # a is mid-episode
    assert list(rig.session.batch_sizes) == [1, 1, 1]  # one pass for version 1, one for version 2
    assert not np.array_equal(actions["a"].data, actions["b"].data)  # same state, different weights
    (later,) = rig.act(observation("a", episode=1))
    assert later.policy_version == 2 and np.array_equal(later.data, actions["b"].data)
    assert rig.session.policies.versions == [2]


def test_immediate_switches_mid_episode() -> None:
    rig = Rig(apply="immediate")
    rig.weights.publish(1)
    rig.act(observation("a"))
    rig.weights.publish(2)
    (action,) = rig.act(observation("a", step=1))
    assert action.policy_version == 2


def test_episodes_before_start_episode_are_left_to_another_actor() -> None:
    rig = Rig(start_episode=3)
    rig.weights.publish(1)
    assert rig.act(observation("a", episode=2)) == [] and rig.session.skipped == 1
    (action,) = rig.act(observation("a", episode=3))
    assert action.episode_id == 3


def test_only_the_newest_observation_of_a_robot_is_answered() -> None:
    rig = Rig()
    rig.weights.publish(1)
    (action,) = rig.act(observation("a", step=0), observation("a", step=1))
    assert action.step == 1


def test_an_observation_that_is_not_valid_is_not_answered() -> None:
    rig = Rig()
    rig.weights.publish(1)
    rig.session.observe("a", observation("a", state=np.full(STATE_DIM, np.inf, np.float32)))
    rig.session.observe("a", observation("another_arm"))
    assert rig.session.refusals.counts == {
        "observation.state is not finite": 1,
        "observation.robot_id names another robot": 1,
    }
    assert rig.session.skipped == 2 and rig.session.act_pending(0.0) == 0 and rig.sent == []


def test_an_action_that_is_not_finite_is_never_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    rig.weights.publish(1)

    def broken(self: GaussianPolicy, obs: Any, *, deterministic: bool) -> torch.Tensor:
        return torch.full((len(obs), ACTION_DIM), float("nan"))

    monkeypatch.setattr(type(rig.weights.policy), "act_tensor", broken)
    assert rig.act(observation("a")) == []
    assert rig.session.refusals.counts == {"action.data is not finite": 1} and rig.session.answered == 0
    monkeypatch.undo()
    (action,) = rig.act(observation("a", step=1))
    assert action.step == 1 and rig.session.answered == 1


def test_a_state_the_policy_cannot_take_is_skipped_and_told_once(caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig()
    rig.weights.publish(1)
    names = tuple(f"joint{i}" for i in range(STATE_DIM + 1))
    wide = replace(observation("a"), state=np.zeros(STATE_DIM + 1, np.float32), state_names=names)
    caplog.set_level(logging.ERROR)
    assert rig.act(wide) == [] and rig.act(replace(wide, step=1)) == []
    assert rig.session.skipped == 2
    assert len([r for r in caplog.records if "cannot act for a" in r.getMessage()]) == 1


def test_random_steps_act_uniformly_at_random_until_the_learner_has_that_many() -> None:
    rig = Rig(deterministic=True, random_steps=100)
    rig.weights.publish(1)
    assert rig.session.warming_up
    warm = [rig.act(observation("a", step=s))[0].data for s in range(4)]
    assert all(np.all(np.abs(a) <= 1.0) for a in warm) and len({a.tobytes() for a in warm}) == 4
    rig.session.note_learner_steps(60)
    rig.session.note_learner_steps(10)  # stats never count back
    assert rig.session.learner_env_steps == 60 and rig.session.warming_up
    rig.session.note_learner_steps(100)
    assert not rig.session.warming_up
    policy = [rig.act(observation("a", step=s))[0].data for s in range(4, 7)]
    assert len({a.tobytes() for a in policy}) == 1  # the policy's mean for the same observation


def _answered(session: ActingSession, count: int) -> bool:
    return session.answered == count


def test_the_inference_thread_answers_as_observations_come() -> None:
    rig = Rig()
    rig.weights.publish(1)
    assert np.isnan(rig.session.latency_percentile(50)) and np.isnan(rig.session.mean_batch())
    rig.session.start()
    try:
        for step in range(3):
            rig.session.observe("a", observation("a", step=step))
            assert wait_until(partial(_answered, rig.session, step + 1), WAIT_S)
    finally:
        rig.session.close()
    assert [a.step for a in rig.sent] == [0, 1, 2]
    assert 0.0 <= rig.session.latency_percentile(50) <= rig.session.latency_percentile(99) < WAIT_S


# ---- sync mode ----------------------------------------------------------------------------------


def test_a_robot_is_ready_once_its_receipt_and_that_version_are_here() -> None:
    rig = Rig(sync_timeout_s=50.0)
    rig.weights.publish(2)
    rig.session.note_receipt("a", robot_id="a", episode_id=3, version=2)
    assert rig.session.ready_to_reset("a", 3)


def test_the_receipt_may_come_before_its_version() -> None:
    rig = Rig(sync_timeout_s=50.0)
    rig.weights.publish(1)
    rig.session.note_receipt("a", robot_id="a", episode_id=4, version=2)
    ready: list[bool] = []
    waiter = threading.Thread(target=lambda: ready.append(rig.session.ready_to_reset("a", 4)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and ready == []  # version 2 is not here yet: the robot waits
    rig.weights.publish(2)
    waiter.join(WAIT_S)
    assert ready == [True]


def test_another_robot_s_receipt_releases_nothing(caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig(sync_timeout_s=0.3)
    rig.weights.publish(2)
    rig.session.note_receipt("a", robot_id="b", episode_id=4, version=2)  # on a's topic, for b
    caplog.set_level(logging.ERROR)
    assert rig.session.ready_to_reset("a", 4)  # at the deadline: reset anyway, and say so
    assert any("a: episode 4: no receipt within 0 s; resetting anyway" in r.getMessage() for r in caplog.records)


def test_a_version_that_never_comes_is_waited_for_until_the_deadline(caplog: pytest.LogCaptureFixture) -> None:
    rig = Rig(sync_timeout_s=0.3)
    rig.weights.publish(1)
    rig.session.note_receipt("a", robot_id="a", episode_id=4, version=5)
    caplog.set_level(logging.ERROR)
    assert rig.session.ready_to_reset("a", 4)
    assert any("policy version 5 never arrived" in r.getMessage() for r in caplog.records)


def test_a_waiting_reset_ends_when_the_session_closes() -> None:
    rig = Rig(sync_timeout_s=50.0)
    ready: list[bool] = []
    waiter = threading.Thread(target=lambda: ready.append(rig.session.ready_to_reset("a", 4)))
    waiter.start()
    rig.session.close()
    waiter.join(WAIT_S)
    assert ready == [False]
