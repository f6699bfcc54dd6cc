"""Version pinning per robot and the policy cache (`user.acting.pinning`): a robot keeps the version of its
episode's start, robots on different versions act with different copies, copies no robot uses are dropped."""

from __future__ import annotations

import torch

from test.acting.helpers import Weights, learning
from user.acting.pinning import PinnedPolicies


def _pinned(immediate: bool = False) -> tuple[PinnedPolicies, Weights]:
    weights = Weights()
    weights.publish(1)
    return PinnedPolicies(learning().build_policy, weights, immediate=immediate), weights


def test_a_robot_keeps_its_episode_s_version_and_takes_the_newest_at_the_next_episode() -> None:
    pinned, weights = _pinned()
    assert pinned.version_for("a", 0) == 1
    weights.publish(2)
    assert pinned.version_for("a", 0) == 1  # mid-episode: unchanged
    assert pinned.version_for("a", 1) == 2  # its next episode starts on the newest
    assert pinned.versions == [2]  # nobody acts with version 1 any more: its copy is gone


def test_robots_on_different_versions_act_with_different_copies() -> None:
    pinned, weights = _pinned()
    assert pinned.version_for("a", 0) == 1
    weights.publish(2)
    assert pinned.version_for("b", 0) == 2
    assert pinned.versions == [1, 2] and pinned.version_for("a", 0) == 1 and pinned.version_for("b", 0) == 2
    one, two = pinned.policy(1), pinned.policy(2)
    assert one is not two and one.version == 1 and two.version == 2
    assert not torch.equal(one.get_weights().data, two.get_weights().data)
    assert torch.equal(two.get_weights().data, weights.policy.get_weights().data)


def test_one_copy_per_version_however_many_robots_use_it() -> None:
    pinned, weights = _pinned()
    for robot in ("a", "b", "c"):
        assert pinned.version_for(robot, 0) == 1
    assert weights.snapshots == 1 and pinned.versions == [1]


def test_immediate_follows_the_newest_version_at_every_step() -> None:
    pinned, weights = _pinned(immediate=True)
    assert pinned.version_for("a", 0) == 1
    weights.publish(2)
    assert pinned.version_for("a", 0) == 2
    assert pinned.versions == [2]
