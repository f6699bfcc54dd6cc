"""WeightPublisher and WeightSubscriber over an in-process bus: versions, chunks, latching, resends, applying.

The loopback bus delivers before `publish` returns and fires timers by hand, so every behaviour here is
checked without waiting; the same behaviours over a real Zenoh router are in test_weight_sync_zenoh.py.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import torch

from test.sync.loopback import FakeTime, Loopback
from user.interfaces.codec import default_codec
from user.policies import FlatWeights, MLPPolicy, MLPPolicyConfig
from user.policies.base import PolicyError
from user.runtime.node import Node
from user.sync import PayloadError, WeightPublisher, WeightSubscriber
from user.sync.assembler import Assembler
from user.sync.chunking import MSG_TYPE, Chunk, chunk_count, chunk_from_msg, chunk_to_msg, split_weights
from user.sync.publisher import REQUEST_TYPE, resend_topic

TOPIC = "/weights"
CODEC = default_codec()


def _policy(seed: int, hidden: tuple[int, ...] = (8,)) -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=hidden, seed=seed))


def _same(a: MLPPolicy, b: MLPPolicy) -> bool:
    return torch.equal(a.get_weights().data, b.get_weights().data)


def _join(chunks: list[Chunk]) -> FlatWeights:
    """The one version `chunks` make, put together by an `Assembler` as a robot site receives them."""
    assembler = Assembler(chunks[0].policy_id)
    made = [w for w in (assembler.add(c) for c in chunks) if w is not None]
    assert len(made) == 1, f"{len(made)} versions from {len(chunks)} chunks"
    return made[0]


def _chunks_on(net: Loopback, topic: str = TOPIC) -> list[Chunk]:
    return [chunk_from_msg(CODEC.decode(p, MSG_TYPE)) for t, p in net.sent if t == topic]


def _send(net: Loopback, chunks: list[Chunk]) -> None:
    """Put chunks on the topic as another (raw) publisher would."""
    raw = Node(net.bus("raw")).create_publisher(TOPIC, MSG_TYPE)
    for chunk in chunks:
        raw.publish(chunk_to_msg(chunk, CODEC, 0))


def _request(net: Loopback, policy_id: str) -> None:
    ask = Node(net.bus("asker")).create_publisher(resend_topic(TOPIC), REQUEST_TYPE)
    ask.publish(CODEC.msg_class(REQUEST_TYPE)(data=policy_id))


@pytest.fixture
def net() -> Loopback:
    return Loopback()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    """A hand-moved monotonic clock for the publisher's and subscriber's resend timing."""
    fake = FakeTime()
    monkeypatch.setattr("user.sync.publisher.time", fake)
    monkeypatch.setattr("user.sync.subscriber.time", fake)
    return fake


def _publisher(net: Loopback, policy: MLPPolicy, **kwargs: Any) -> WeightPublisher:
    return WeightPublisher(Node(net.bus("learner")), policy, policy_id="arm", topic=TOPIC, **kwargs)


def _subscriber(net: Loopback, policy: MLPPolicy, **kwargs: Any) -> WeightSubscriber:
    return WeightSubscriber(Node(net.bus("robot")), policy, policy_id="arm", topic=TOPIC, **kwargs)


# ---- publisher -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"every_k_updates": 0}, "every_k_updates must be at least 1, got 0"),
        ({"chunk_size": 0}, "chunk_size must be at least 1 byte, got 0"),
    ],
)
def test_publisher_settings_are_checked(net: Loopback, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _publisher(net, _policy(1), **kwargs)


def test_publisher_refuses_an_unsupported_dtype_before_publishing_anything(net: Loopback) -> None:
    with pytest.raises(PayloadError, match="torch.int32"):
        _publisher(net, _policy(1), dtype=torch.int32)
    assert net.sent == []


def test_every_kth_update_publishes_the_next_version(net: Loopback) -> None:
    learner = _policy(1)
    pub = _publisher(net, learner, every_k_updates=3)
    assert [pub.after_update() for _ in range(7)] == [None, None, 1, None, None, 2, None]
    assert pub.version == learner.version == 2
    assert {c.version for c in _chunks_on(net)} == {1, 2}


def test_every_update_publishes_by_default(net: Loopback) -> None:
    pub = _publisher(net, _policy(1))
    assert [pub.after_update() for _ in range(3)] == [1, 2, 3]


def test_versions_continue_from_the_policy_s_own_version(net: Loopback) -> None:
    learner = _policy(1)
    learner.version = 41  # e.g. restored from a checkpoint
    pub = _publisher(net, learner)
    assert pub.version == 41
    assert pub.publish_now() == 42
    learner.version = 3  # a policy whose version went back must not make versions repeat
    assert pub.publish_now() == 43 and learner.version == 43


def test_a_published_version_is_the_policy_s_weights_in_equal_chunks(net: Loopback) -> None:
    learner = _policy(1, hidden=(32, 32))
    pub = _publisher(net, learner, chunk_size=256)
    assert pub.publish_now() == 1
    chunks = _chunks_on(net)
    assert len(chunks) == pub.chunks_per_version > 3
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert {(c.policy_id, c.version, c.count, c.dtype) for c in chunks} == {("arm", 1, len(chunks), "float32")}
    assert {c.publisher for c in chunks} == {""}  # a publisher given no name names none
    assert all(len(c.data) <= 256 for c in chunks)
    got = _join(chunks)
    assert got.version == 1 and torch.equal(got.data, learner.get_weights().data)


def test_weights_are_sent_in_the_wire_dtype(net: Loopback) -> None:
    learner = _policy(1, hidden=(32, 32))
    pub = _publisher(net, learner, dtype=torch.bfloat16, chunk_size=256)
    pub.publish_now()
    chunks = _chunks_on(net)
    assert {c.dtype for c in chunks} == {"bfloat16"} and len(chunks) == pub.chunks_per_version
    assert torch.equal(_join(chunks).data, learner.get_weights(torch.bfloat16).data)


def test_the_topic_is_reliable_and_latched_with_one_version_of_history(net: Loopback) -> None:
    learner = _policy(1, hidden=(32, 32))
    pub = _publisher(net, learner, chunk_size=300)
    (declared,) = net.find("publisher", TOPIC)
    assert declared.typename == MSG_TYPE
    assert declared.qos.reliable and declared.qos.latched and declared.qos.depth == pub.chunks_per_version
    (requests,) = net.find("subscription", f"{TOPIC}/resend")
    assert requests.typename == REQUEST_TYPE


def test_a_late_joiner_gets_exactly_the_newest_version(net: Loopback) -> None:
    learner = _policy(1, hidden=(32, 32))
    pub = _publisher(net, learner, chunk_size=256)
    pub.publish_now()
    with torch.no_grad():
        next(learner.actor.parameters()).mul_(-1.0)
    pub.publish_now()
    assert [len(h) for h in net.history.values()] == [pub.chunks_per_version]
    robot = _policy(2, hidden=(32, 32))
    sub = _subscriber(net, robot, chunk_size=256)
    assert sub.version == 2 and sub.received_versions == 1 and sub.rejected == 0
    assert _same(robot, learner)


def test_resend_topic_is_beside_the_weight_topic() -> None:
    assert resend_topic("/arm/weights") == "/arm/weights/resend"
    assert resend_topic("/arm/weights/") == "/arm/weights/resend"


def test_a_request_republishes_the_newest_version_at_most_once_per_interval(net: Loopback, clock: FakeTime) -> None:
    learner = _policy(1, hidden=(32, 32))
    pub = _publisher(net, learner, chunk_size=256, min_resend_interval_s=0.5)
    _request(net, "arm")  # nothing published yet: nothing to resend
    assert pub.resends == 0 and _chunks_on(net) == []
    pub.publish_now()
    pub.publish_now()
    first = _chunks_on(net)
    _request(net, "gripper")  # another policy's request
    assert pub.resends == 0
    _request(net, "arm")
    assert pub.resends == 1
    again = _chunks_on(net)[len(first) :]
    assert again == first[pub.chunks_per_version :]  # the newest version, byte for byte
    clock.now += 0.25  # binary-exact steps: the interval is reached exactly
    _request(net, "arm")
    assert pub.resends == 1  # too soon
    clock.now += 0.25
    _request(net, "arm")
    assert pub.resends == 2 and len(_chunks_on(net)) == len(first) + 2 * pub.chunks_per_version


def test_publications_and_resends_are_logged(net: Loopback, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="user.sync")
    pub = _publisher(net, _policy(1), min_resend_interval_s=0.0)
    pub.publish_now()
    size = _chunks_on(net)[0].total_bytes
    assert f"published weights of policy 'arm' version 1 (1 chunks, {size} bytes, float32)" in caplog.messages
    _request(net, "arm")
    assert "re-published weights of policy 'arm' version 1 on request" in caplog.messages


def test_closing_the_publisher_undeclares_its_topic_and_request_subscription(net: Loopback) -> None:
    pub = _publisher(net, _policy(1))
    pub.close()
    assert all(d.closed for d in net.declared)


# ---- subscriber ----------------------------------------------------------------------------------------


def test_the_subscription_is_latched_deep_enough_for_the_widest_dtype(net: Loopback) -> None:
    robot = _policy(2, hidden=(32, 32))
    _subscriber(net, robot, chunk_size=256, resend_period_s=0.25)
    (declared,) = net.find("subscription", TOPIC)
    float64_chunks = chunk_count(len(split_weights(robot.get_weights(torch.float64), "arm")[0].data), 256)
    assert declared.qos.reliable and declared.qos.latched and declared.qos.depth == float64_chunks
    (requests,) = net.find("publisher", f"{TOPIC}/resend")
    assert requests.typename == REQUEST_TYPE
    (timer,) = net.find("timer")
    assert timer.topic == "0.25"


def test_the_snapshot_is_the_version_in_use(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    before = robot.get_weights().data.clone()
    sub = _subscriber(net, robot)
    snap = sub.snapshot()
    assert snap.version == 0 and torch.equal(snap.data, before)
    _publisher(net, learner).publish_now()
    assert sub.version == 1 and sub.received_versions == 1 and _same(robot, learner)
    snap = sub.snapshot()
    assert snap.version == 1 and torch.equal(snap.data, learner.get_weights().data)


def test_each_received_version_is_applied_and_the_newest_is_in_use(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    pub = _publisher(net, learner)
    pub.publish_now()
    with torch.no_grad():
        next(learner.actor.parameters()).add_(1.0)
    pub.publish_now()
    assert sub.received_versions == 2
    assert sub.version == 2 and _same(robot, learner)


def test_an_older_version_arriving_late_is_ignored(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    learner.version = 1
    old = split_weights(learner.get_weights(), "arm")
    _publisher(net, learner).publish_now()  # version 2
    _send(net, old)
    assert sub.version == 2 and sub.received_versions == 1 and sub.rejected == 0


def test_a_version_is_applied_on_arrival(net: Loopback, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="user.sync")
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    _publisher(net, learner).publish_now()
    assert sub.version == 1 and _same(robot, learner)
    assert "received weights of policy 'arm' version 1" in caplog.messages
    assert "policy 'arm' now acts with weights version 1" in caplog.messages


def test_an_incomplete_version_is_never_applied(net: Loopback) -> None:
    learner, robot = _policy(1, hidden=(32, 32)), _policy(2, hidden=(32, 32))
    sub = _subscriber(net, robot, chunk_size=256)
    learner.version = 1
    _send(net, split_weights(learner.get_weights(), "arm", 256)[:-1])
    assert sub.version == 0 and sub.received_versions == 0 and sub.rejected == 0
    assert not sub.wait_for_version(1, 0.0)


def test_a_corrupt_version_is_rejected_counted_and_logged(net: Loopback, caplog: pytest.LogCaptureFixture) -> None:
    learner, robot = _policy(1), _policy(2)
    before = robot.get_weights().data.clone()
    sub = _subscriber(net, robot)
    learner.version = 1
    (chunk,) = split_weights(learner.get_weights(), "arm")
    _send(net, [Chunk(**{**chunk.__dict__, "crc32": chunk.crc32 ^ 1})])
    assert sub.rejected == 1 and sub.version == 0 and torch.equal(robot.get_weights().data, before)
    (line,) = [r for r in caplog.records if r.getMessage().startswith("refused weights: ")]
    assert "CRC-32" in line.getMessage() and line.levelno == logging.WARNING  # damage on the way: a warning
    assert sub.refusals.counts == {"ChecksumError": 1}
    _publisher(net, learner).publish_now()  # the next good version still gets through
    assert sub.version == 2 and _same(robot, learner)


def test_weights_of_another_layout_are_rejected(net: Loopback, caplog: pytest.LogCaptureFixture) -> None:
    robot = _policy(2)
    sub = _subscriber(net, robot)
    _publisher(net, _policy(1, hidden=(16,))).publish_now()
    assert sub.rejected == 1 and sub.received_versions == 0 and sub.version == 0
    assert (
        "refused weights: weights of policy 'arm' version 1: weights do not fit the policy (parameter names or shapes "
        "differ)" in caplog.messages
    )


def test_chunks_of_other_policies_are_ignored_not_rejected(net: Loopback) -> None:
    robot = _policy(2)
    sub = _subscriber(net, robot)
    WeightPublisher(Node(net.bus("other")), _policy(3), policy_id="gripper", topic=TOPIC).publish_now()
    assert sub.rejected == 0 and sub.version == 0 and sub.received_versions == 0


class RefusingPolicy(MLPPolicy):
    """A policy that cannot take weights right now (e.g. its device went away)."""

    def load_weights(self, weights: FlatWeights) -> None:
        raise PolicyError("device lost")


def test_weights_the_policy_refuses_are_counted_and_it_keeps_its_own(
    net: Loopback, caplog: pytest.LogCaptureFixture
) -> None:
    robot = RefusingPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,), seed=2))
    sub = _subscriber(net, robot)
    _publisher(net, _policy(1)).publish_now()
    assert sub.rejected == 1 and sub.version == 0
    assert "refused weights: could not apply weights of policy 'arm' version 1: device lost" in caplog.messages
    _request(net, "arm")  # the publisher sends version 1 again: received again, refused again
    assert sub.rejected == 2 and sub.version == 0 and sub.received_versions == 2 and sub.refusals.counts == {"apply": 2}


def test_wait_for_version_is_true_once_that_version_or_a_newer_one_is_in_use(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    assert not sub.wait_for_version(1, 0.0)
    _publisher(net, learner).publish_now()
    assert sub.wait_for_version(1, 0.0) and sub.wait_for_version(0, 0.0)
    assert not sub.wait_for_version(2, 0.0)


def test_wait_for_version_wakes_when_the_version_arrives(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    pub = _publisher(net, learner)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(sub.wait_for_version(1, 30.0)))
    waiter.start()
    pub.publish_now()
    waiter.join(30.0)
    assert result == [True]


def test_wait_for_version_gives_up_at_its_deadline(net: Loopback) -> None:
    sub = _subscriber(net, _policy(2))
    assert not sub.wait_for_version(1, 0.01)


def test_the_subscriber_asks_for_a_resend_while_it_has_no_weights(net: Loopback, clock: FakeTime) -> None:
    asked: list[str] = []
    Node(net.bus("learner")).create_subscription(resend_topic(TOPIC), REQUEST_TYPE, lambda m: asked.append(m.data))
    sub = _subscriber(net, _policy(2), resend_period_s=1.0)
    clock.now += 0.5
    net.fire_timers()
    assert asked == [] and sub.resend_requests == 0  # not yet a whole period without chunks
    clock.now += 0.5
    net.fire_timers()
    assert asked == ["arm"] and sub.resend_requests == 1
    net.fire_timers()
    assert asked == ["arm", "arm"]


def test_the_subscriber_stops_asking_once_a_version_arrived(net: Loopback, clock: FakeTime) -> None:
    sub = _subscriber(net, _policy(2), resend_period_s=1.0)
    _publisher(net, _policy(1)).publish_now()
    clock.now += 5.0
    net.fire_timers()
    assert sub.resend_requests == 0


def test_a_stalled_version_is_asked_for_again_and_completed_by_the_resend(net: Loopback, clock: FakeTime) -> None:
    learner, robot = _policy(1, hidden=(32, 32)), _policy(2, hidden=(32, 32))
    sub = _subscriber(net, robot, chunk_size=256, resend_period_s=1.0)
    pub = _publisher(net, learner, chunk_size=256, min_resend_interval_s=0.0)
    pub.publish_now()
    assert sub.version == 1
    with torch.no_grad():
        next(learner.actor.parameters()).add_(1.0)
    last = split_weights(learner.get_weights(), "arm", 256)[-1].data
    net.drop = lambda topic, payload: topic == TOPIC and chunk_from_msg(CODEC.decode(payload, MSG_TYPE)).data == last
    pub.publish_now()  # its last chunk is lost
    assert sub.version == 1
    clock.now += 0.5
    net.fire_timers()
    assert sub.resend_requests == 0  # chunks arrived recently
    net.drop = lambda topic, payload: False
    clock.now += 0.5
    net.fire_timers()
    assert sub.resend_requests == 1 and pub.resends == 1
    assert sub.version == 2 and _same(robot, learner)


def test_closing_the_subscriber_undeclares_everything(net: Loopback) -> None:
    sub = _subscriber(net, _policy(2))
    sub.close()
    assert {d.kind for d in net.declared} == {"subscription", "publisher", "timer"}
    assert all(d.closed for d in net.declared)


def test_a_publisher_without_a_period_publishes_only_when_asked(net: Loopback) -> None:
    """The sync-mode learner's publisher: updates never publish by themselves, `publish_now` does."""
    pub = _publisher(net, _policy(1), every_k_updates=None)
    assert [pub.after_update() for _ in range(5)] == [None] * 5
    assert pub.publish_now() == 1 and pub.after_update() is None


# ---- what a subscriber refuses, and what a refusal must not block (issue 13, finding 3) ------------------


def _poisoned(policy: MLPPolicy, value: float = float("nan")) -> str:
    """Put `value` into the policy's first parameter; returns that parameter's name."""
    with torch.no_grad():
        next(policy.actor.parameters()).view(-1)[1] = value
    return policy.weight_spec.names[0]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weights_that_are_not_finite_are_not_applied_though_their_checksum_is_valid(
    net: Loopback, caplog: pytest.LogCaptureFixture, value: float
) -> None:
    learner, robot = _policy(1), _policy(2)
    before = robot.get_weights().data.clone()
    sub = _subscriber(net, robot)
    name = _poisoned(learner, value)
    learner.version = 23
    _send(net, split_weights(learner.get_weights(), "arm"))  # a valid CRC over the bad values
    assert sub.version == 0 and sub.received_versions == 0 and sub.rejected == 1
    assert torch.equal(robot.get_weights().data, before)
    assert sub.refusals.counts == {f"weights.{name} are not finite": 1}
    (line,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert line.getMessage() == (
        f"refused weights: weights of policy 'arm' version 23: weights.{name} are not finite (1 of "
        f"{learner.weight_spec.numel} values)"
    )
    good = _policy(3)
    good.version = 23  # the same version number again, now with finite weights: it was never taken
    _publisher(net, good).publish_now()
    assert sub.version == 24 and _same(robot, good)


def test_a_rejected_version_with_a_huge_number_does_not_hold_later_versions_back(net: Loopback) -> None:
    learner, robot = _policy(1), _policy(2)
    sub = _subscriber(net, robot)
    other = _policy(1, hidden=(16,))  # a whole, checksummed version of another layout
    other.version = 2**40
    _send(net, split_weights(other.get_weights(), "arm"))
    assert sub.rejected == 1 and sub.version == 0
    learner.version = 1
    pub = _publisher(net, learner)
    assert pub.publish_now() == 2
    assert sub.version == 2 and _same(robot, learner)
    with torch.no_grad():
        next(learner.actor.parameters()).add_(1.0)
    assert pub.publish_now() == 3 and sub.version == 3 and _same(robot, learner)


def test_an_unfinished_version_with_a_huge_number_does_not_hold_later_versions_back(net: Loopback) -> None:
    learner, robot = _policy(1, hidden=(32, 32)), _policy(2, hidden=(32, 32))
    sub = _subscriber(net, robot, chunk_size=256)
    stalled = _policy(3, hidden=(32, 32))
    stalled.version = 2**40
    _send(net, split_weights(stalled.get_weights(), "arm", 256)[:1])  # its other chunks never come
    pub = _publisher(net, learner, chunk_size=256)
    for version in (1, 2):
        with torch.no_grad():
            next(learner.actor.parameters()).add_(1.0)
        assert pub.publish_now() == version
        assert sub.version == version and _same(robot, learner)


def test_a_version_the_policy_could_not_take_is_taken_when_sent_again(net: Loopback) -> None:
    class RefusingOnce(MLPPolicy):
        refused = False

        def load_weights(self, weights: FlatWeights) -> None:
            if not self.refused:
                self.refused = True
                raise PolicyError("device busy")
            super().load_weights(weights)

    learner = _policy(1)
    robot = RefusingOnce(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(8,), seed=2))
    sub = _subscriber(net, robot)
    learner.version = 1
    chunks = split_weights(learner.get_weights(), "arm")
    _send(net, chunks)
    assert sub.version == 0 and sub.rejected == 1 and sub.refusals.counts == {"apply": 1}
    _send(net, chunks)  # a resend of the same version
    assert sub.version == 1 and _same(robot, learner)


def test_only_the_configured_publisher_s_versions_are_taken(net: Loopback) -> None:
    robot = _policy(2)
    sub = _subscriber(net, robot, publisher="learner_a")
    stranger = WeightPublisher(Node(net.bus("b")), _policy(3), policy_id="arm", topic=TOPIC, publisher="learner_b")
    stranger.publish_now()
    anonymous = _policy(4)
    anonymous.version = 1
    _send(net, split_weights(anonymous.get_weights(), "arm"))  # names no publisher
    assert sub.version == 0 and sub.rejected == 2 and sub.refusals.counts == {"weights publisher": 2}
    learner = _policy(1)
    own = WeightPublisher(Node(net.bus("a")), learner, policy_id="arm", topic=TOPIC, publisher="learner_a")
    assert own.publish_now() == 1
    assert sub.version == 1 and _same(robot, learner)
    assert {c.publisher for c in _chunks_on(net)} == {"learner_a", "learner_b", ""}


def test_a_subscriber_without_a_publisher_takes_any(net: Loopback) -> None:
    robot = _policy(2)
    sub = _subscriber(net, robot)
    learner = _policy(1)
    WeightPublisher(Node(net.bus("b")), learner, policy_id="arm", topic=TOPIC, publisher="learner_b").publish_now()
    assert sub.version == 1 and _same(robot, learner)


def test_the_publisher_refuses_weights_that_are_not_finite(net: Loopback) -> None:
    learner = _policy(1)
    pub = _publisher(net, learner)
    assert pub.publish_now() == 1
    good = learner.get_weights().data.clone()
    name = _poisoned(learner)
    with pytest.raises(PayloadError, match=rf"version 2 not published: weights\.{name} are not finite"):
        pub.publish_now()
    assert pub.version == learner.version == 1
    assert {c.version for c in _chunks_on(net)} == {1}  # nothing of version 2 went out
    late = _subscriber(net, _policy(2))  # a late joiner still gets the last good version
    assert late.version == 1 and torch.equal(late.snapshot().data, good)
    with torch.no_grad():
        learner._flat.buffer.copy_(good)
    assert pub.publish_now() == 2


def test_the_publisher_refuses_values_beyond_the_wire_dtype(net: Loopback) -> None:
    learner = _policy(1)
    pub = _publisher(net, learner, dtype=torch.float16)
    _poisoned(learner, 1e6)  # finite in float32, inf in float16
    with pytest.raises(PayloadError, match="are not finite"):
        pub.publish_now()
    assert net.sent == [] and pub.version == 0
