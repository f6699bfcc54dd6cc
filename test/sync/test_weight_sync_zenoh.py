"""Weight sync over a real Zenoh router: learner bus -> robot bus, each whole version applied as it arrives."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import pytest
import torch

from test.conftest import wait_until
from user.bus.zenoh_bus import ZenohBus
from user.policies import MLPPolicy, MLPPolicyConfig
from user.runtime.node import Node
from user.sync import WeightPublisher, WeightSubscriber
from user.sync.chunking import MSG_TYPE, chunk_to_msg, split_weights
from user.sync.publisher import resend_topic

MakeBus = Callable[..., ZenohBus]
DEADLINE_S = 10.0


def _policy(seed: int, hidden: tuple[int, ...] = (32, 32), state_dim: int = 4) -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=state_dim, action_dim=2, hidden=hidden, seed=seed))


def _nodes(make_bus: MakeBus) -> tuple[Node, Node]:
    return Node(make_bus("learner")), Node(make_bus("robot"))


def _same(a: MLPPolicy, b: MLPPolicy) -> bool:
    return torch.equal(a.get_weights().data, b.get_weights().data)


def test_every_kth_update_reaches_the_robot(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    learner, robot = _policy(seed=1), _policy(seed=2)
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic)
    pub = WeightPublisher(learner_node, learner, policy_id="arm", topic=topic, every_k_updates=3)
    assert [pub.after_update() for _ in range(3)] == [None, None, 1]
    assert sub.wait_for_version(1, DEADLINE_S)
    assert sub.version == 1 and robot.version == 1
    assert _same(robot, learner)


def test_a_version_is_applied_on_arrival_and_versions_increase(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    learner, robot = _policy(seed=1), _policy(seed=2)
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic)
    pub = WeightPublisher(learner_node, learner, policy_id="arm", topic=topic, dtype=torch.bfloat16, chunk_size=512)
    assert pub.chunks_per_version > 1
    assert pub.publish_now() == 1
    assert sub.wait_for_version(1, DEADLINE_S)
    torch.testing.assert_close(robot.get_weights().data, learner.get_weights().data, rtol=1e-2, atol=1e-2)

    with torch.no_grad():
        next(learner.actor.parameters()).add_(1.0)
    assert pub.publish_now() == 2
    assert sub.wait_for_version(2, DEADLINE_S)
    assert sub.version == 2
    expected = learner.get_weights(torch.bfloat16).data.to(torch.float32)
    assert torch.equal(robot.get_weights().data, expected)


def test_late_joiner_gets_the_latest_whole_version(make_bus: MakeBus, topic: str) -> None:
    learner_node = Node(make_bus("learner"))
    learner = _policy(seed=1)
    pub = WeightPublisher(learner_node, learner, policy_id="arm", topic=topic, chunk_size=1024)
    assert pub.chunks_per_version > 2
    pub.publish_now()
    with torch.no_grad():
        next(learner.actor.parameters()).mul_(-1.0)
    assert pub.publish_now() == 2

    robot = _policy(seed=2)
    sub = WeightSubscriber(Node(make_bus("robot")), robot, policy_id="arm", topic=topic, chunk_size=1024)
    assert sub.wait_for_version(2, DEADLINE_S), sub.version
    assert sub.version == 2 and _same(robot, learner)


def test_other_policy_ids_on_the_topic_are_ignored(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    arm, other, robot = _policy(seed=1), _policy(seed=3), _policy(seed=2)
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic)
    WeightPublisher(learner_node, other, policy_id="gripper", topic=topic).publish_now()
    WeightPublisher(learner_node, arm, policy_id="arm", topic=topic).publish_now()
    assert sub.wait_for_version(1, DEADLINE_S)
    assert _same(robot, arm) and sub.rejected == 0


def test_large_policy_arrives_intact_in_chunks(make_bus: MakeBus, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="user.sync")
    learner_node, robot_node = _nodes(make_bus)
    learner = _policy(seed=1, hidden=(1024, 1024), state_dim=64)
    robot = _policy(seed=2, hidden=(1024, 1024), state_dim=64)
    size_mb = learner.get_weights().data.numel() * 4 / 1e6
    assert size_mb > 4.0
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic)
    pub = WeightPublisher(learner_node, learner, policy_id="arm", topic=topic)
    assert pub.chunks_per_version >= 5
    pub.publish_now()
    assert sub.wait_for_version(1, 20.0)
    assert _same(robot, learner) and sub.rejected == 0
    assert wait_until(lambda: "now acts with weights version 1" in caplog.text, 1.0)


def test_corrupt_version_on_the_wire_is_rejected_and_never_applied(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    learner, robot = _policy(seed=1), _policy(seed=2)
    before = robot.get_weights().data.clone()
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic)
    raw = learner_node.create_publisher(topic, MSG_TYPE)
    assert raw.raw.wait_for_subscribers(DEADLINE_S)  # type: ignore[attr-defined]
    learner.version = 7
    chunks = split_weights(learner.get_weights(), "arm", chunk_size=256)
    chunks[1] = dataclasses.replace(chunks[1], data=bytes(len(chunks[1].data)))
    for chunk in chunks:
        raw.publish(chunk_to_msg(chunk, learner_node.codec, 0))
    assert wait_until(lambda: sub.rejected == 1, DEADLINE_S)
    assert sub.version == 0 and torch.equal(robot.get_weights().data, before)

    WeightPublisher(learner_node, learner, policy_id="arm", topic=topic).publish_now()  # a good version 8
    assert sub.wait_for_version(8, DEADLINE_S) and _same(robot, learner)


def test_stalled_version_makes_the_subscriber_ask_for_a_resend(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    learner, robot = _policy(seed=1), _policy(seed=2)
    asks: list[str] = []
    learner_node.create_subscription(resend_topic(topic), "std_msgs/msg/String", lambda m: asks.append(m.data))
    sub = WeightSubscriber(robot_node, robot, policy_id="arm", topic=topic, resend_period_s=0.2)
    assert wait_until(lambda: len(asks) >= 1, DEADLINE_S)  # no weights yet: it asks
    raw = learner_node.create_publisher(topic, MSG_TYPE)
    assert raw.raw.wait_for_subscribers(DEADLINE_S)  # type: ignore[attr-defined]
    learner.version = 1
    chunks = split_weights(learner.get_weights(), "arm", chunk_size=256)
    for chunk in chunks[:-1]:  # the last chunk is lost
        raw.publish(chunk_to_msg(chunk, learner_node.codec, 0))
    seen = len(asks)
    assert wait_until(lambda: len(asks) > seen, DEADLINE_S) and set(asks) == {"arm"}
    raw.publish(chunk_to_msg(chunks[-1], learner_node.codec, 0))
    assert sub.wait_for_version(1, DEADLINE_S) and _same(robot, learner)


def test_publisher_republishes_the_newest_version_on_request(make_bus: MakeBus, topic: str) -> None:
    learner_node, robot_node = _nodes(make_bus)
    learner = _policy(seed=1)
    pub = WeightPublisher(learner_node, learner, policy_id="arm", topic=topic, chunk_size=1024, min_resend_interval_s=0)
    got: list[int] = []
    robot_node.create_subscription(topic, MSG_TYPE, lambda m: got.append(int(m.version)))
    ask = robot_node.create_publisher(resend_topic(topic), "std_msgs/msg/String")
    assert ask.raw.wait_for_subscribers(DEADLINE_S)  # type: ignore[attr-defined]
    assert pub.publish_now() == 1  # may or may not reach the plain subscriber (routes still settling)
    request = robot_node.codec.msg_class("std_msgs/msg/String")
    ask.publish(request(data="other"))  # another policy's request: ignored
    ask.publish(request(data="arm"))
    assert wait_until(lambda: pub.resends == 1, DEADLINE_S)
    n = pub.chunks_per_version
    assert wait_until(lambda: len(got) >= n and len(got) % n == 0, DEADLINE_S), len(got)
    assert set(got) == {1}
    ask.publish(request(data="arm"))
    assert wait_until(lambda: pub.resends == 2, DEADLINE_S)


def test_a_late_joiner_amid_deltas_gets_a_keyframe_then_follows(make_bus: Callable[..., ZenohBus], topic: str) -> None:
    learner = _policy(1, (64, 64), 8)
    pub = WeightPublisher(Node(make_bus("learner")), learner, policy_id="arm", topic=topic, delta=True)
    first = WeightSubscriber(Node(make_bus("first")), _policy(2, (64, 64), 8), policy_id="arm", topic=topic)
    for version in range(1, 4):
        with torch.no_grad():
            for p in learner.actor.parameters():
                p.add_(1e-3)
        assert pub.publish_now() == version
        assert first.wait_for_version(version, 10.0)
    late_policy = _policy(3, (64, 64), 8)
    late = WeightSubscriber(Node(make_bus("late")), late_policy, policy_id="arm", topic=topic)
    assert late.wait_for_version(3, 20.0)  # the cached delta could not decode: it asked, and got version 3 whole
    assert late.resend_requests >= 1
    assert torch.equal(late_policy.get_weights().data, learner.get_weights().data)
    pub.publish_now()
    assert late.wait_for_version(4, 10.0) and first.wait_for_version(4, 10.0)
    assert wait_until(lambda: torch.equal(late_policy.get_weights().data, learner.get_weights().data), 5.0)
