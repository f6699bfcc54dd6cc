"""What the rollout's core forgets of a robot that left (`PinnedPolicies.forget`, `ActingSession.forget`): its pin,
the policy copy no other robot uses, its queued observation."""

from __future__ import annotations

from test.acting.helpers import Weights, learning, observation
from test.acting.test_acting_session import Rig
from user.acting.pinning import PinnedPolicies


def test_a_robot_that_left_releases_its_version_but_not_anothers() -> None:
    weights = Weights()
    weights.publish(1)
    pinned = PinnedPolicies(learning().build_policy, weights)
    assert pinned.version_for("a", 0) == 1
    weights.publish(2)
    assert pinned.version_for("b", 0) == 2 and pinned.versions == [1, 2]
    pinned.forget("a")
    assert pinned.versions == [2]  # nobody acts with version 1 any more
    pinned.forget("a")  # twice: nothing to forget
    pinned.forget("b")
    assert pinned.versions == []
    assert pinned.version_for("a", 5) == 2  # back: pinned afresh at its next observation


def test_the_session_drops_the_queued_observation_of_a_robot_that_left() -> None:
    rig = Rig()
    rig.weights.publish(1)
    assert [a.robot_id for a in rig.act(observation("a"), observation("b"))] == ["a", "b"]
    rig.session.observe("a", observation("a", step=1))
    rig.session.observe("b", observation("b", step=1))
    rig.session.forget("a")
    rig.session.act_pending(0.0)
    assert [(a.robot_id, a.step) for a in rig.sent[2:]] == [("b", 1)]  # nothing more for the robot that left
    assert rig.session.policies.versions == [1]
