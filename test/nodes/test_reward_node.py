"""`reward` node over a real Zenoh router (in-process buses), and its ROS-free core `user.rewards.online`.

Transition and press stamps are synthetic (a fake robot clock): windows are decided by stamps, release by
the node's own clock, so the outcomes do not depend on scheduling.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from test.conftest import wait_until
from user.bus.ros_params import ros_params
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError
from user.interfaces.domain import (
    Action,
    EncodedImage,
    Observation,
    Transition,
    transition_from_msg,
    transition_to_msg,
)
from user.interfaces.images import encode_jpeg
from user.interfaces.stamps import header
from user.nodes.pedal import MODE_EPISODE_END, MODE_STEP, PedalNode
from user.nodes.reward import RewardNode, RewardNodeParams
from user.rewards.base import RewardStep
from user.rewards.classifier import ClassifierConfig, SuccessClassifier
from user.rewards.human import HumanPress, PressMode
from user.rewards.online import HumanRewarder, Outcome, StepRewarder
from user.rewards.rule import RuleReward, RuleRewardConfig
from user.rewards.source import RewardSourceConfig
from user.runtime.node import Node

pytestmark = pytest.mark.timeout(60)

BASE_NS = 1_700_000_000_000_000_000  # a fake robot clock
MS = 1_000_000
TARGET = (0.5, 0.0, 0.2)
WAIT_S = 8.0


def at(ms: float) -> int:
    return BASE_NS + round(ms * MS)


def textured(bright: bool, n: int, seed: int) -> np.ndarray:
    """`n` noisy 16x16 frames around a bright or a dark level.

    Texture matters: a uniform frame leaves batch norm nothing but the batch's mean, and whether a tiny
    network then learns the level depended on library releases (numpy 2.4 / opencv 5 broke it)."""
    noise = np.random.default_rng(seed).integers(-40, 41, (n, 16, 16, 3))
    return np.clip((200 if bright else 50) + noise, 0, 255).astype(np.uint8)


def image(bright: bool) -> EncodedImage:
    return EncodedImage("front", "jpeg", encode_jpeg(textured(bright, 1, seed=99)[0]), 0)


def make_transition(
    robot: str,
    episode: int,
    step: int,
    start_ms: float,
    end_ms: float,
    *,
    position: tuple[float, float, float] = (0.0, 0.0, 0.0),
    bright: bool | None = None,
    reward: float = 0.25,
    terminated: bool = False,
    truncated: bool = False,
) -> Transition:
    state = np.asarray([*position, 0.0, 0.0, 0.0, 1.0, 0.04], dtype=np.float32)
    images = () if bright is None else (image(bright),)
    obs = Observation(robot, "reach", episode, step, np.zeros(8, np.float32), at(start_ms))
    nxt = Observation(robot, "reach", episode, step + 1, state, at(end_ms), images)
    action = Action(robot, episode, step, np.zeros(7, np.float32), at(end_ms))
    return Transition(obs, action, reward, nxt, terminated, truncated, stamp_ns=at(end_ms))


def episode(robot: str, episode_id: int, steps: int, start_ms: float = 0.0, **kw: Any) -> list[Transition]:
    """`steps` transitions of 100 ms each; the last one truncated."""
    return [
        make_transition(
            robot, episode_id, i, start_ms + 100 * i, start_ms + 100 * (i + 1), truncated=i == steps - 1, **kw
        )
        for i in range(steps)
    ]


class Harness:
    """A fake robot (transition publisher), a pedal (press publisher) and an inbox of rewarded transitions."""

    def __init__(self, make_bus: Callable[..., ZenohBus], robot: str, human_topic: str) -> None:
        self.robot = robot
        self.human_topic = human_topic
        self.node = Node(make_bus("fake_robot"))
        self.received: list[Transition] = []
        self.replayed: list[Transition] = []
        self._lock = threading.Lock()
        self.node.create_subscription(f"/{robot}/transitions/rewarded", "user/msg/Transition", self._on)
        self.node.create_subscription(f"/{robot}/transitions/rewarded/replay", "user/msg/Transition", self._on_replay)
        self.transitions = self.node.create_publisher(f"/{robot}/transitions", "user/msg/Transition")
        self.replays = self.node.create_publisher(f"/{robot}/transitions/replay", "user/msg/Transition")
        self.presses = self.node.create_publisher(human_topic, "user/msg/HumanReward")
        self._make_bus = make_bus

    def _on(self, msg: Any) -> None:
        with self._lock:
            self.received.append(transition_from_msg(msg))

    def _on_replay(self, msg: Any) -> None:
        with self._lock:
            self.replayed.append(transition_from_msg(msg))

    def start(self, **params: Any) -> RewardNode:
        params = {"robot_id": self.robot, **params}
        if params.get("source") == "human":  # the presses' topic is a setting of the human source only
            params.setdefault("human_topic", self.human_topic)
        reward = RewardNode(self._make_bus(f"reward_{uuid.uuid4().hex[:4]}", params))
        matched = [reward._pub.raw, self.transitions.raw, reward._pub_replay.raw, self.replays.raw]
        if reward.human is not None:
            matched.append(self.presses.raw)
        for pub in matched:  # nothing is published before the other side listens
            assert pub.wait_for_subscribers(WAIT_S), pub.topic  # type: ignore[attr-defined]
        return reward

    def send(self, *transitions: Transition) -> None:
        for t in transitions:
            self.transitions.publish(transition_to_msg(t, self.node.codec))

    def resend(self, *transitions: Transition) -> None:
        """What a robot's outbox does with an episode the learner did not acknowledge."""
        for t in transitions:
            self.replays.publish(transition_to_msg(t, self.node.codec))

    def press(
        self, stamp_ns: int, reward: float = 1.0, mode: int = MODE_STEP, success: bool = False, robot_id: str = ""
    ) -> None:
        msg_cls = self.node.codec.msg_class("user/msg/HumanReward")
        msg = msg_cls(
            header=header(stamp_ns, "", self.node.codec),
            robot_id=robot_id,
            source="test_pedal",
            reward=float(reward),
            mode=mode,
            success=success,
        )
        self.presses.publish(msg)

    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def replayed_count(self) -> int:
        with self._lock:
            return len(self.replayed)

    def got(self, n: int) -> list[Transition]:
        assert wait_until(lambda: self.count() >= n, WAIT_S), f"got {self.count()} of {n} transitions"
        with self._lock:
            return list(self.received)


@pytest.fixture
def harness(make_bus: Callable[..., ZenohBus], topic: str) -> Harness:
    return Harness(make_bus, f"arm_{uuid.uuid4().hex[:6]}", topic)


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny classifier that tells bright frames (success) from dark ones; trains in about a second."""
    torch.set_num_threads(1)
    frames = np.concatenate([textured(False, 16, seed=0), textured(True, 16, seed=1)])
    labels = np.asarray([False] * 16 + [True] * 16)
    clf = SuccessClassifier(ClassifierConfig(width=4, image_size=16, epochs=10, batch_size=8, lr=3e-3, val_fraction=0))
    clf.fit(frames, labels)
    assert np.array_equal(clf.probability(frames) >= 0.5, labels)
    held_out = np.concatenate([textured(False, 16, seed=2), textured(True, 16, seed=3)])
    assert np.array_equal(clf.probability(held_out) >= 0.5, labels)
    path = tmp_path_factory.mktemp("classifier") / "reward.pt"
    clf.save(path)
    return path


def keys(ts: list[Transition]) -> list[tuple[int, int]]:
    return [(t.episode_id, t.step) for t in ts]


# ---- human -----------------------------------------------------------------------------------------


def test_human_presses_land_on_their_steps_and_success_ends_the_episode(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=1.0)
    try:
        ep = episode(harness.robot, 7, 5)
        # the loop held for 50 ms before step 2: its observation is stamped 250 ms, the step before ended at 200
        ep[2] = make_transition(harness.robot, 7, 2, 250, 300)
        harness.press(at(150))  # step 1
        harness.press(at(220), 0.5)  # during the hold before step 2: belongs to step 2, not to a gap
        harness.press(at(310))  # step 3, twice: rewards add up
        harness.press(at(390))
        assert wait_until(lambda: node.presses == 4, WAIT_S)
        harness.send(*ep)
        assert wait_until(lambda: node.received == 5, WAIT_S)
        # step 4 has closed and its transition arrived; the operator's success press comes late, within latency
        harness.press(at(450), mode=MODE_EPISODE_END, success=True)
        out = harness.got(5)
        assert keys(out) == [(7, i) for i in range(5)]
        assert [t.reward for t in out] == [0.0, 1.0, 0.5, 2.0, 1.0]
        last = out[-1]
        assert last.success and last.terminated and not last.truncated
        assert not any(t.success or t.terminated for t in out[:-1])
        assert node.unmatched_presses == 0 and node.bad_windows == 0
        np.testing.assert_array_equal(last.next_observation.state, ep[4].next_observation.state)
    finally:
        node.destroy()


def test_pedal_node_press_rewards_the_step_it_was_pressed_in(
    harness: Harness, make_bus: Callable[..., ZenohBus]
) -> None:
    """The real pedal node stamps presses with the host clock, as a real robot stamps its transitions."""
    node = harness.start(source="human", latency_s=2.0)
    now_ns = time.time_ns()
    step = make_transition(harness.robot, 2, 0, 0, 100)
    wide = Transition(  # a step around now on the host clock, long enough for the scripted press to fall in it
        replace(step.observation, stamp_ns=now_ns - 1_000_000_000),
        step.action,
        0.0,
        replace(step.next_observation, stamp_ns=now_ns + 5_000_000_000),
        stamp_ns=now_ns + 5_000_000_000,
    )
    harness.send(wide)
    assert wait_until(lambda: node.received == 1, WAIT_S)
    params = {"source": "scripted", "topic": harness.human_topic, "robot_id": harness.robot}
    pedal = PedalNode(make_bus("pedal", {**params, "scripted_presses": [[0.5, "KEY_A"]]}))
    try:
        (out,) = harness.got(1)
        assert pedal.published == 1 and node.presses == 1
        assert (out.reward, out.success, out.terminated) == (1.0, True, True)
    finally:
        pedal.destroy()
        node.destroy()


def test_human_failure_press_ends_the_episode_without_success(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=0.5)
    try:
        harness.press(at(120), 0.0, MODE_EPISODE_END, success=False)
        assert wait_until(lambda: node.presses == 1, WAIT_S)
        harness.send(*episode(harness.robot, 1, 4))
        assert wait_until(lambda: node.after_end == 2, WAIT_S)  # steps 2 and 3 came after the person's end
        out = harness.got(2)
        assert [(t.reward, t.terminated, t.success) for t in out] == [(0, False, False), (0, True, False)]
        assert node.published == 2 and harness.count() == 2
    finally:
        node.destroy()


def test_a_resent_episode_gets_the_outcomes_already_given(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=0.3)
    try:
        harness.press(at(150))  # step 1
        harness.press(at(250), 1.0, MODE_EPISODE_END, success=True)  # step 2 ends it; step 3 is past the end
        assert wait_until(lambda: node.presses == 2, WAIT_S)
        ep = episode(harness.robot, 4, 4)
        harness.send(*ep)
        live = harness.got(3)
        harness.resend(*ep)  # the learner missed them: the robot re-sends the raw episode
        assert wait_until(lambda: node.replayed == 3, WAIT_S)
        assert wait_until(lambda: harness.replayed_count() == 3, WAIT_S)  # published, now on its way to us
        with harness._lock:
            replayed = list(harness.replayed)
        assert (
            [(t.step, t.reward, t.terminated, t.success) for t in replayed]
            == [(t.step, t.reward, t.terminated, t.success) for t in live]
            == [(0, 0.0, False, False), (1, 1.0, False, False), (2, 1.0, True, True)]
        )
        harness.resend(*episode(harness.robot, 99, 2))  # never judged here: a person cannot judge it now
        assert wait_until(lambda: node.unrewarded_replays == 2, WAIT_S)
        assert node.replayed == 3
    finally:
        node.destroy()


def test_human_keeps_order_across_episodes_and_loses_nothing(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=0.05)
    try:
        sent = [t for e in range(3) for t in episode(harness.robot, e, 20, start_ms=3000 * e)]
        harness.send(*sent)
        out = harness.got(len(sent))
        assert keys(out) == keys(sent)
        assert node.received == node.published == len(sent)
        assert [t.truncated for t in out] == [t.truncated for t in sent]
    finally:
        node.destroy()


def test_bad_human_inputs_are_counted_and_logged(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    node = harness.start(source="human", latency_s=0.1)
    try:
        harness.press(at(50), robot_id="another_arm")
        harness.press(at(50), mode=7)
        assert wait_until(lambda: node.foreign_presses == 1 and node.bad_presses == 1, WAIT_S)
        assert node.presses == 0
        garbage = node.bus.create_publisher(node.input_topic, "user/msg/Transition")
        garbage.publish(b"\x00\x01 not a transition")
        assert wait_until(lambda: node.malformed_messages == 1, WAIT_S)
        first = make_transition(harness.robot, 3, 0, 0, 100)
        stuck_clock = make_transition(harness.robot, 3, 1, 100, 100)  # no time passed: no window
        harness.send(first, stuck_clock)
        out = harness.got(2)
        assert keys(out) == [(3, 0), (3, 1)] and [t.reward for t in out] == [0.0, 0.0]
        assert node.bad_windows == 1
        harness.press(at(60))  # step 0 was already released: too late
        assert wait_until(lambda: node.unmatched_presses == 1, WAIT_S)
        assert out[0].reward == 0.0
        harness.press(at(3_600_000))  # an hour after the robot's latest step
        assert wait_until(lambda: "different clocks" in caplog.text, WAIT_S)
        text = caplog.text
        assert "another_arm" in text and "unknown mode 7" in text and "malformed" in text
        assert "window" in text and "matched no step" in text
    finally:
        node.destroy()


def test_destroy_releases_held_transitions(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=5.0)
    harness.send(*episode(harness.robot, 0, 3))
    assert wait_until(lambda: node.received == 3, WAIT_S)
    assert harness.count() == 0 and node.human is not None and node.human.held == 3
    node.destroy()
    assert keys(harness.got(3)) == [(0, 0), (0, 1), (0, 2)]


# ---- rule, classifier, task --------------------------------------------------------------------------


def test_rule_source_scores_the_next_observation(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    rule = {"target_position": list(TARGET), "position_tolerance_m": 0.01, "success_bonus": 1.0}
    node = harness.start(source="rule", rule=rule)
    try:
        far = make_transition(harness.robot, 0, 0, 0, 100, position=(0.45, 0.0, 0.2))
        near = make_transition(harness.robot, 0, 1, 100, 200, position=TARGET)
        broken = Transition(  # a state without the tool pose (valid at the door: finite, consistent)
            replace(near.observation, state=np.zeros(3, np.float32)),
            near.action,
            0.0,
            Observation(harness.robot, "reach", 0, 2, np.zeros(3, np.float32), at(300)),
            stamp_ns=at(300),
        )
        last = make_transition(harness.robot, 0, 2, 200, 300, position=TARGET, truncated=True)
        harness.send(far, near, broken, last)
        out = harness.got(3)
        assert wait_until(lambda: node.unscored == 1, WAIT_S)
        assert keys(out) == [(0, 0), (0, 1), (0, 2)]
        expected = RuleReward(RuleRewardConfig(target_position=TARGET, success_bonus=1.0))
        for got, sent in zip(out, (far, near, last), strict=True):
            assert got.reward == pytest.approx(expected(RewardStep.from_observation(sent.next_observation)).reward)
        assert out[0].reward < 1.0 and out[1].reward == pytest.approx(2.0)
        assert not out[1].success and out[2].truncated  # step mode: the robot's own flags stay
        assert "tool pose" in caplog.text and "not forwarded" in caplog.text
        # a re-sent episode this node never saw (it restarted) is scored afresh by the rule
        unseen = [make_transition(harness.robot, 5, i, 100 * i, 100 * i + 100, position=TARGET) for i in range(2)]
        harness.resend(*unseen)
        assert wait_until(lambda: node.replayed == 2, WAIT_S)
        with harness._lock:
            assert [t.reward for t in harness.replayed] == pytest.approx([2.0, 2.0])
    finally:
        node.destroy()


def test_classifier_source_step_and_terminal_modes(
    harness: Harness, make_bus: Callable[..., ZenohBus], classifier_file: Path
) -> None:
    step_node = harness.start(source="classifier", classifier_path=str(classifier_file))
    try:
        sent = [
            make_transition(harness.robot, 0, 0, 0, 100, bright=False),
            make_transition(harness.robot, 0, 1, 100, 200, bright=True),
            make_transition(harness.robot, 0, 2, 200, 300),  # no camera: cannot be scored
            make_transition(harness.robot, 0, 3, 300, 400, bright=True, truncated=True),
        ]
        harness.send(*sent)
        out = harness.got(3)
        assert wait_until(lambda: step_node.unscored == 1, WAIT_S)
        assert keys(out) == [(0, 0), (0, 1), (0, 3)]
        assert [t.reward for t in out] == [0.0, 1.0, 1.0]
        assert out[-1].truncated and not out[-1].terminated  # step mode leaves the outcome to the robot
    finally:
        step_node.destroy()
    terminal = Harness(make_bus, harness.robot + "_t", harness.human_topic)
    node = terminal.start(source="classifier", classifier_path=str(classifier_file), classifier_mode="terminal")
    try:
        ep = episode(terminal.robot, 4, 3, bright=True) + episode(terminal.robot, 5, 2, start_ms=1000, bright=False)
        terminal.send(*ep)
        out = terminal.got(5)
        assert keys(out) == keys(ep)
        assert [t.reward for t in out] == [0.0, 0.0, 1.0, 0.0, 0.0]
        assert [(t.success, t.terminated, t.truncated) for t in (out[2], out[4])] == [
            (True, True, False),
            (False, False, True),
        ]
    finally:
        node.destroy()


def test_task_source_passes_transitions_through(harness: Harness) -> None:
    node = harness.start()
    try:
        sent = episode(harness.robot, 9, 3, reward=0.75)
        harness.send(*sent)
        out = harness.got(3)
        assert keys(out) == keys(sent) and [t.reward for t in out] == [0.75] * 3
        assert [t.truncated for t in out] == [False, False, True]
    finally:
        node.destroy()


def test_configuration_errors_are_clear(make_bus: Callable[..., ZenohBus], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="classifier_path"):
        RewardNode(make_bus("r1", {"source": "classifier"}))
    with pytest.raises(ConfigError, match="cannot read"):
        RewardNode(make_bus("r2", {"source": "classifier", "classifier_path": str(tmp_path / "none.pt")}))
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read"):
        RewardNode(make_bus("r6", {"source": "classifier", "classifier_path": str(tmp_path / "garbage.pt")}))
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="not a reward classifier"):
        RewardNode(make_bus("r7", {"source": "classifier", "classifier_path": str(tmp_path / "other.pt")}))
    with pytest.raises(ConfigError, match="unknown key 'colour'"):
        RewardNode(make_bus("r3", {"source": "rule", "rule": {"colour": "red"}}))
    with pytest.raises(ConfigError, match="latency"):
        RewardNode(make_bus("r4", {"source": "human", "latency_s": -1.0}))
    with pytest.raises(ConfigError, match="unknown key 'lattency_s'"):
        RewardNode(make_bus("r5", {"lattency_s": 1.0}))
    # a setting of another source than the one selected is refused, not quietly ignored
    with pytest.raises(ConfigError, match="latency_s: a setting of source 'human', but source 'rule' is selected"):
        RewardNode(make_bus("r8", {"source": "rule", "latency_s": 1.0}))
    with pytest.raises(ConfigError, match="rule: a setting of source 'rule', but source 'task' is selected"):
        RewardNode(make_bus("r9", {"rule": {"scale": 0.1}}))
    with pytest.raises(ConfigError, match="classifier_mode: a setting of source 'classifier', but source 'human'"):
        RewardNode(make_bus("r10", {"source": "human", "classifier_mode": "terminal"}))


# ---- the ROS-free core ---------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_human_rewarder_releases_in_order_after_latency() -> None:
    clock = FakeClock()
    core: HumanRewarder[int] = HumanRewarder("arm", 0.2, clock)
    ep = episode("arm", 0, 3)
    for i, t in enumerate(ep):
        clock.now = 0.1 * i
        assert core.add_transition(t, i) is None
    core.add_press(HumanPress(at(50), 1.0))  # step 0, still held
    clock.now = 0.25  # step 0 due (arrived at 0.0), step 1 not yet (0.1 + 0.2)
    assert [(i, o.reward) for i, o in core.release()] == [(0, 1.0)]
    core.add_press(HumanPress(at(60), 1.0))  # step 0 already gone
    assert core.unmatched == 1
    core.add_press(HumanPress(at(250), 2.0, PressMode.EPISODE_END, success=True))
    clock.now = 1.0
    released = core.release()
    assert [i for i, _ in released] == [1, 2]
    assert released[1][1].reward == 2.0 and released[1][1].success and released[1][1].terminated
    assert core.held == 0 and core.release() == []


def test_human_rewarder_windows_chain_within_an_episode_only() -> None:
    core: HumanRewarder[int] = HumanRewarder("arm", 0.0, FakeClock())
    a = make_transition("arm", 0, 0, 0, 100)
    b = make_transition("arm", 0, 1, 150, 200)  # held 50 ms before it
    c = make_transition("arm", 1, 0, 300, 400)  # next episode: starts at its own observation
    assert (core.window(a).start_ns, core.window(a).end_ns) == (at(0), at(100))
    core.add_transition(a, 0)
    assert core.window(b).start_ns == at(100)
    core.add_transition(b, 1)
    assert core.window(c).start_ns == at(300)
    core.add_transition(c, 2)
    bad = make_transition("arm", 1, 1, 350, 380)  # overlaps step 0 of episode 1: no window, reward 0, in order
    assert core.add_transition(bad, 3) is not None and core.bad_windows == 1
    core.add_press(HumanPress(at(250), 1.0))  # between the episodes
    assert [i for i, _ in core.flush()] == [0, 1, 2, 3]
    assert core.unmatched == 1


def test_step_rewarder_terminal_mode_judges_the_outcome() -> None:
    rule = RuleReward(RuleRewardConfig(target_position=TARGET, mode="terminal"))
    scorer = StepRewarder(rule, decides_outcome=True)
    mid = make_transition("arm", 0, 0, 0, 100, position=TARGET)
    end = make_transition("arm", 0, 1, 100, 200, position=TARGET, truncated=True)
    assert scorer(mid).reward == 0.0 and not scorer(mid).terminated
    out = scorer(end)
    assert out.success and out.terminated and not out.truncated and out.reward == pytest.approx(1.0)
    passthrough = StepRewarder(None)(end)
    assert (passthrough.reward, passthrough.truncated) == (0.25, True)


# ---- the door (issue 13: nothing bad gets in) ---------------------------------------------------------


def test_transitions_that_are_not_valid_are_refused_and_the_episode_goes_on(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    node = harness.start()
    try:
        sent = episode(harness.robot, 9, 3)
        forged = replace(sent[1], reward=float("nan"))
        other = replace(sent[1], observation=replace(sent[1].observation, robot_id="someone_else"))
        harness.send(sent[0], forged, other, sent[1], sent[2])
        out = harness.got(3)
        assert keys(out) == keys(sent) and [t.reward for t in out] == [0.25] * 3
        assert node.refusals.counts == {"reward is not finite": 1, "observation.robot_id names another robot": 1}
        refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused transition")]
        assert refused[0] == (
            f"refused transition on /{harness.robot}/transitions (episode 9 step 1): reward is not finite (nan)"
        )
        harness.resend(forged)  # the replay path has the same door
        assert wait_until(lambda: node.refusals.total == 3, WAIT_S)
        assert node.replayed == 0 and harness.replayed == []
    finally:
        node.destroy()


def test_a_reward_that_is_not_finite_is_never_forwarded(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    node = harness.start()
    try:
        monkeypatch.setattr(node, "scorer", lambda t: Outcome(float("inf"), False, t.terminated, t.truncated))
        sent = episode(harness.robot, 2, 2)
        harness.send(*sent)
        assert wait_until(lambda: node.unscored == 2, WAIT_S)
        assert harness.count() == 0 and node.published == 0
        assert node.refusals.counts == {"reward is not finite": 2}
        harness.resend(*sent)  # a re-send gets what was given: nothing
        assert wait_until(lambda: node.received == 2, WAIT_S)
    finally:
        node.destroy()


def test_a_press_with_a_reward_that_is_not_finite_is_refused(harness: Harness) -> None:
    node = harness.start(source="human", latency_s=0.1)
    try:
        harness.press(at(50), reward=float("nan"))
        harness.press(at(50), reward=1e30)
        assert wait_until(lambda: node.bad_presses == 2, WAIT_S)
        assert node.refusals.counts == {"press.reward is not finite": 1, "press.reward is out of range": 1}
        harness.send(make_transition(harness.robot, 0, 0, 0, 100, truncated=True))
        (out,) = harness.got(1)
        assert out.reward == 0.0 and node.presses == 0
    finally:
        node.destroy()


def test_each_reward_source_setting_is_declared_once_and_keeps_its_name() -> None:
    """The reward node's settings extend the source's (`RewardSourceConfig`), under the names users always wrote."""
    assert issubclass(RewardNodeParams, RewardSourceConfig)
    own = inspect.get_annotations(RewardNodeParams)
    assert not [f.name for f in dataclasses.fields(RewardSourceConfig) if f.name in own]  # none declared again
    names = {p.name for p in ros_params(RewardNodeParams)}
    source = {"source", "latency_s", "rule.dense", "classifier_path", "classifier_threshold", "classifier_mode"}
    assert source | {"robot_id", "namespace", "human_topic", "settle_period_s"} <= names
