"""The robot node in real-time mode (20 Hz, in-process buses): the expert drives it through the freshest
action, a scripted teleop takes over for a while, and the reset service answers with a first observation;
the e-stop, actions and interventions are not queued behind a slow reset; a restarted node continues its ids."""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from test.conftest import wait_until
from user.bus.base import LATCHED
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import Action, Transition, action_to_msg, transition_from_msg
from user.interfaces.stamps import header, now_ns
from user.nodes.expert import ExpertNode
from user.nodes.pedal import MODE_EPISODE_END, MODE_STEP
from user.nodes.robot import RobotNode
from user.nodes.teleop import TeleopNode
from user.robot_loop.gate import SOURCE_HUMAN, SOURCE_SCRIPTED
from user.robots.arm import ArmRobot
from user.robots.base import RobotError
from user.runtime.node import Node, started

pytestmark = pytest.mark.timeout(60)


class TransitionInbox:
    """Every transition a robot streams, decoded, in arrival order."""

    def __init__(self, probe: Node, robot: str) -> None:
        self._got: list[Transition] = []
        self._lock = threading.Lock()
        probe.create_subscription(f"/{robot}/transitions", "user/msg/Transition", self._on)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self._got.append(transition_from_msg(msg))

    def __len__(self) -> int:
        with self._lock:
            return len(self._got)

    def seen(self) -> list[Transition]:
        with self._lock:
            return list(self._got)


def test_realtime_robot_with_expert_teleop_and_reset(make_bus: Callable[..., ZenohBus]) -> None:
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    probe = Node(make_bus("probe"))
    inbox = TransitionInbox(probe, robot)
    params = {"robot_id": robot, "task": "button_press", "control_rate_hz": 20.0, "privileged_state": True}
    node = started(RobotNode(make_bus("robot", params)))
    expert = ExpertNode(make_bus("expert", {"robot_id": robot, "task": "button_press"}))
    human = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
    teleop_params: dict[str, object] = {"robot_id": robot, "device": "scripted", "scripted_action": human}
    teleop_params.update(scripted_start_s=0.5, scripted_duration_s=0.5)
    teleop = TeleopNode(make_bus("teleop", teleop_params))
    try:
        assert wait_until(lambda: len(inbox) >= 50, 20.0), node.failed
        seen = inbox.seen()
        intervened = [t for t in seen if t.action.intervened]
        assert 3 <= len(intervened) <= 16  # ~0.5 s at 20 Hz, give or take the deadline
        for t in seen:
            assert t.action.source == (SOURCE_HUMAN if t.action.intervened else SOURCE_SCRIPTED)
        for t in intervened:
            np.testing.assert_allclose(t.action.data, human, atol=1e-6)
        assert any(t.success for t in seen)
        request = node.codec.msg_class("user/srv/Reset_Request")(robot_id=robot, seed=7)
        reply = probe.call_service(f"/{robot}/reset", "user/srv/Reset", request, 10.0)
        assert reply.success and reply.observation.step == 0 and len(reply.observation.state) > 14
    finally:
        teleop.destroy()
        expert.destroy()
        node.destroy()
    assert node.failed is None


def test_a_pedal_episode_end_press_stops_the_robots_episode(make_bus: Callable[..., ZenohBus], topic: str) -> None:
    """HIL: the operator's EPISODE_END press on the human reward topic ends the running episode at once."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    probe = Node(make_bus("probe"))
    inbox = TransitionInbox(probe, robot)
    press = probe.create_publisher(topic, "user/msg/HumanReward")
    action = probe.create_publisher(f"/{robot}/action", "user/msg/Action")
    params = {
        "robot_id": robot,
        "task": "peg_insertion",
        "control_rate_hz": 20.0,
        "max_steps": 400,  # 20 s: without the press the episode would outlast the test
        "human_reward_topic": topic,
        "auto_reset": False,
    }
    node = started(RobotNode(make_bus("robot", params)))
    stop = threading.Event()

    def policy() -> None:  # a policy that hovers: never succeeds, never terminates
        while not stop.wait(0.02):
            obs = node.loop.observation
            if obs is not None:
                msg = action_to_msg(Action(robot, obs.episode_id, obs.step, np.zeros(7, np.float32)), probe.codec)
                action.publish(msg)

    thread = threading.Thread(target=policy, daemon=True)
    thread.start()
    try:
        assert press.raw.wait_for_subscribers(10.0)  # type: ignore[attr-defined]
        assert wait_until(lambda: len(inbox) >= 10, 20.0), node.failed
        other = probe.codec.msg_class("user/msg/HumanReward")(
            header=header(now_ns(), "", probe.codec), robot_id="someone_else", source="pedal0", reward=1.0,
            mode=MODE_EPISODE_END, success=True,
        )  # fmt: skip
        press.publish(other)  # for another robot: ignored
        step_press = dataclasses.replace(other, robot_id=robot, mode=MODE_STEP)
        press.publish(step_press)  # a step reward does not end anything
        assert not wait_until(lambda: not node.loop.in_episode, 0.5)
        press.publish(dataclasses.replace(other, robot_id=robot))
        assert wait_until(lambda: not node.loop.in_episode, 5.0)
        assert wait_until(lambda: any(t.done for t in inbox.seen()), 5.0)  # the last step is on its way to us
        seen = inbox.seen()
        assert seen[-1].truncated and not seen[-1].terminated and len(seen) < 400
        assert not any(t.done for t in seen[:-1]) and node.loop.ended_by_request == 1
    finally:
        stop.set()
        thread.join(5.0)
        node.destroy()
    assert node.failed is None


class SlowHome:
    """A reset that drives home for as long as the test lets it (a real arm takes seconds): the robot's
    `_reset` blocks until `release` (with a deadline), after telling `entered`."""

    def __init__(self, original: Callable[[int | None], Any]) -> None:
        self.original = original
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, seed: int | None) -> Any:
        self.entered.set()
        self.release.wait(30.0)
        return self.original(seed)


def _reset_request(node: RobotNode, robot: str, seed: int = 3) -> Any:
    return node.codec.msg_class("user/srv/Reset_Request")(robot_id=robot, seed=seed)


def _interventions_received(node: RobotNode, robot: str) -> int:
    """The interventions the node reports received in its `/diagnostics` (the robot's line)."""
    (arm,) = [s for s in node.diagnostics() if s.name == f"{robot}: robot"]
    return int(arm.values["interventions_received"])


def test_estop_actions_and_interventions_are_honoured_while_a_slow_reset_runs(
    make_bus: Callable[..., ZenohBus], topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 11: the reset service used to hold the node's only callback lock until the arm was home, so the
    e-stop (and every action) waited behind it. Now the e-stop latches while the arm is still driving home, and
    after the reset the arm holds; resets are refused until the e-stop is cleared, and the loop lives on."""
    robot, estop_topic = f"arm_{uuid.uuid4().hex[:6]}", f"{topic}_estop"
    probe = Node(make_bus("probe"))
    estop = probe.create_publisher(estop_topic, "std_msgs/msg/Bool", LATCHED)
    action = probe.create_publisher(f"/{robot}/action", "user/msg/Action")
    intervention = probe.create_publisher(f"/{robot}/intervention", "user/msg/Action")
    params = {"robot_id": robot, "task": "button_press", "control_rate_hz": 20.0, "estop_topic": estop_topic,
              "reset_timeout_s": 60.0}  # fmt: skip  # the caller would otherwise give up while the arm drives home
    node = started(RobotNode(make_bus("robot", params)))
    arm = node.robot
    assert isinstance(arm, ArmRobot)
    slow = SlowHome(arm._reset)

    def reset() -> Any:
        return probe.call_service(f"/{robot}/reset", "user/srv/Reset", _reset_request(node, robot), 60.0)

    try:
        assert wait_until(lambda: node.loop.in_episode, 20.0), node.failed
        monkeypatch.setattr(arm, "_reset", slow)
        replies: list[Any] = []
        call = threading.Thread(target=lambda: replies.append(reset()))
        call.start()
        assert slow.entered.wait(20.0)  # the arm is driving home now
        estop.publish(probe.codec.msg_class("std_msgs/msg/Bool")(data=True))
        ahead = Action(robot, 10_000, 0, np.zeros(7, np.float32), policy_version=77)  # for an episode to come
        action.publish(action_to_msg(ahead, probe.codec))
        intervention.publish(action_to_msg(dataclasses.replace(ahead, intervened=True), probe.codec))
        latched = wait_until(lambda: arm.estopped, 15.0)
        fed = wait_until(lambda: node.gate.policy_version == 77 and _interventions_received(node, robot) > 0, 15.0)
        home_already = slow.release.is_set()
        slow.release.set()
        call.join(30.0)
        assert latched and not home_already, "the e-stop waited for the reset to finish"
        assert fed, "actions and interventions waited for the reset to finish"
        assert replies and replies[0].success, replies  # the reset itself completed
        # the new episode holds: the e-stop stays latched, and the next reset is refused with the reason
        refused = reset()
        assert not refused.success and "e-stopped" in refused.message and estop_topic in refused.message
        assert arm.estopped and node.loop.in_episode and node.failed is None
        estop.publish(probe.codec.msg_class("std_msgs/msg/Bool")(data=False))
        assert wait_until(lambda: not arm.estopped, 15.0)
        again = reset()
        assert again.success, again.message
    finally:
        slow.release.set()
        node.destroy()
    assert node.failed is None


def test_a_restarted_robot_node_continues_its_episode_ids(make_bus: Callable[..., ZenohBus], tmp_path: Path) -> None:
    """Finding 4 (in process): with `state_dir`, a new node for the same robot continues after the ids the
    last one used, the episode it was in the middle of included; without it, it would start at 0 again. The
    completed episodes the first node had no receipt for are in the second one's outbox, to be re-sent."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    params = {"robot_id": robot, "task": "button_press", "control_rate_hz": 50.0, "max_steps": 5,
              "privileged_state": True, "state_dir": str(tmp_path / "robots")}  # fmt: skip
    expert = ExpertNode(make_bus("expert", {"robot_id": robot, "task": "button_press"}))
    first = started(RobotNode(make_bus("robot", params)))
    try:
        assert wait_until(lambda: (first.loop.episode_id or 0) >= 2, 30.0), first.failed
    finally:
        first.destroy()
    used = first.loop.episode_id
    assert used is not None
    assert first.outbox is not None
    left = first.outbox.episodes.pending()  # completed, never acknowledged (no learner): on disk for the next node
    assert len(left) >= 2 and used not in left
    second = started(RobotNode(make_bus("robot2", params)))
    try:
        assert second.outbox is not None and second.outbox.episodes.pending()[: len(left)] == left
        assert wait_until(lambda: second.loop.episode_id is not None, 20.0), second.failed
        assert second.loop.episode_id == used + 1
        assert wait_until(lambda: (second.loop.episode_id or 0) >= used + 2, 30.0), second.failed
    finally:
        second.destroy()
        expert.destroy()


def test_a_robot_started_e_stopped_waits_for_the_clear_instead_of_dying(
    make_bus: Callable[..., ZenohBus], topic: str
) -> None:
    """The latched e-stop reaches a node that starts after it: no episode starts (the arm does not drive to its
    start pose) until it is cleared; the control loop used to stop for good on the refused first reset."""
    robot, estop_topic = f"arm_{uuid.uuid4().hex[:6]}", f"{topic}_estop"
    probe = Node(make_bus("probe"))
    estop = probe.create_publisher(estop_topic, "std_msgs/msg/Bool", LATCHED)
    estop.publish(probe.codec.msg_class("std_msgs/msg/Bool")(data=True))
    params = {"robot_id": robot, "task": "button_press", "control_rate_hz": 20.0, "estop_topic": estop_topic,
              "wait_for_consumer_s": 30.0}  # fmt: skip  # the first reset waits for the test's subscriber
    node = started(RobotNode(make_bus("robot", params)))
    arm = node.robot
    assert isinstance(arm, ArmRobot)
    try:
        assert wait_until(lambda: arm.estopped, 20.0)  # the latched stop arrived before the first reset
        TransitionInbox(probe, robot)  # now the first reset is tried
        assert wait_until(lambda: node.resets_refused > 0, 20.0), node.failed
        assert node.loop.episode_id is None and node.failed is None
        estop.publish(probe.codec.msg_class("std_msgs/msg/Bool")(data=False))
        assert wait_until(lambda: node.loop.in_episode, 20.0), node.failed
        assert not arm.estopped and node.loop.episode_id == 0
    finally:
        node.destroy()
    assert node.failed is None


def test_a_robot_whose_control_loop_dies_ends_as_failed(
    make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver fault that ends the control thread must not leave a live node that never moves the arm again: the
    node fails (its process exits 1 with the reason, and the launcher respawns it)."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    node = started(RobotNode(make_bus("robot", {"robot_id": robot, "task": "button_press", "control_rate_hz": 50.0})))
    asked: list[str] = []
    node.request_stop = lambda: asked.append("stop")

    def broken(_reason: str) -> Any:
        raise RuntimeError("the arm's controller stopped answering")

    try:
        monkeypatch.setattr(node.robot, "hold", broken)  # no policy yet: every period holds, and now faults
        assert wait_until(lambda: node.failure is not None, 20.0)
    finally:
        node.destroy()
    assert node.failure == "control loop stopped: RuntimeError: the arm's controller stopped answering"
    assert asked == ["stop"] and isinstance(node.failed, RuntimeError)


def test_a_driver_fault_ends_the_robot_node_with_one_line(
    make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A `RobotError` carries the driver's words for the operator (e.g. the ARX SDK's process died): the node says
    it once, without a traceback, and fails."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    node = started(RobotNode(make_bus("robot", {"robot_id": robot, "task": "button_press", "control_rate_hz": 50.0})))
    node.request_stop = lambda: None

    def gone(_reason: str) -> Any:
        raise RobotError("the arm's SDK process ended (killed by signal 9)")

    try:
        with caplog.at_level(logging.DEBUG, logger=node.log.name):
            monkeypatch.setattr(node.robot, "hold", gone)
            assert wait_until(lambda: node.failure is not None, 20.0)
    finally:
        node.destroy()
    assert node.failure == "control loop stopped: the arm's SDK process ended (killed by signal 9)"
    lines = [r for r in caplog.records if "SDK process ended" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
