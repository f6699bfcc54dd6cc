"""The robot node in real-time mode (20 Hz, in-process buses): the expert drives it through the freshest
action, a scripted teleop takes over for a while, and the reset service answers with a first observation."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from test.conftest import wait_until
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import Action, Transition, action_to_msg, transition_from_msg
from user.interfaces.stamps import header, now_ns
from user.nodes.expert import ExpertNode
from user.nodes.pedal import MODE_EPISODE_END, MODE_STEP
from user.nodes.robot import RobotNode
from user.nodes.teleop import TeleopNode
from user.robot_loop.gate import SOURCE_HUMAN, SOURCE_SCRIPTED
from user.runtime.node import Node

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
    node = RobotNode(make_bus("robot", params))
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
    node = RobotNode(make_bus("robot", params))
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
        seen = inbox.seen()
        assert seen[-1].truncated and not seen[-1].terminated and len(seen) < 400
        assert not any(t.done for t in seen[:-1]) and node.loop.ended_by_request == 1
    finally:
        stop.set()
        thread.join(5.0)
        node.destroy()
    assert node.failed is None
