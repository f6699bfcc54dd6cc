"""On the simulated arm: the e-stop topic latches a hold until cleared, and a stale action holds within two
control periods (watchdog)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest

from test.conftest import wait_until
from test.robots.driving import drive_once, watchdog_for_rate
from user.bus.base import LATCHED
from user.bus.zenoh_bus import ZenohBus
from user.robots.base import RobotError
from user.robots.estop import EStopTopic
from user.runtime.node import Node
from user.sim.robot import SimFrankaRobot

STILL_M = 1e-3  # TCP displacement that counts as "did not move"
PUSH = np.array([1.0, 0, 0, 0, 0, 0, 1.0], dtype=np.float32)  # move +x at the per-step limit, gripper open


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _tcp(robot: SimFrankaRobot) -> np.ndarray:
    return np.copy(robot.state().tcp_pose[:3])


def test_stale_action_holds_within_two_periods(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot()
    period = 1.0 / robot.descriptor.control_rate_hz
    clock = FakeClock()
    watchdog = watchdog_for_rate(robot.descriptor.control_rate_hz, clock=clock)
    watchdog.feed(PUSH)
    results = []
    for _ in range(6):  # the action arrives once, then never again
        results.append(drive_once(robot, watchdog))
        clock.now += period
    held = [r.held for r in results]
    assert held[0] is False  # the fresh action moved the target
    first_hold = held.index(True)
    assert first_hold <= 2  # held within two control periods of the last fresh action
    assert all(held[first_hold:])
    # Holding keeps the last commanded target: the target never moves again, and the arm settles onto it
    # (the impedance controller's lag closes) instead of carrying on in the direction it was pushed.
    target = robot.target_pose
    assert target is not None
    for _ in range(10):
        drive_once(robot, watchdog)
        clock.now += period
    assert robot.target_pose is not None and np.array_equal(robot.target_pose, target)
    assert np.linalg.norm(_tcp(robot) - target[:3]) < 2 * STILL_M


def test_estop_topic_latches_until_cleared(
    make_robot: Callable[..., SimFrankaRobot], make_bus: Callable[..., ZenohBus], topic: str
) -> None:
    robot = make_robot()
    node = Node(make_bus("robot_node"))
    estop = EStopTopic(node, robot, topic)
    operator = Node(make_bus("operator"))
    pub = operator.create_publisher(topic, "std_msgs/msg/Bool", LATCHED)  # an e-stop button publishes latched
    bool_msg = operator.codec.msg_class("std_msgs/msg/Bool")

    pub.publish(bool_msg(data=True))
    assert wait_until(lambda: robot.estopped, 5.0)
    start = _tcp(robot)
    for _ in range(5):
        assert robot.step(PUSH).held
    assert np.linalg.norm(_tcp(robot) - start) < STILL_M

    pub.publish(bool_msg(data=False))
    assert wait_until(estop.apply_pending, 5.0)
    assert not robot.estopped
    moved = robot.step(PUSH)
    assert not moved.held
    robot.step(PUSH)
    assert np.linalg.norm(_tcp(robot) - start) > 5 * STILL_M  # it moves again once cleared


def test_a_clear_the_robot_refuses_keeps_the_latch(
    make_robot: Callable[..., SimFrankaRobot],
    make_bus: Callable[..., ZenohBus],
    topic: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A driver that cannot clear yet (a Franka whose user stop is still pressed) keeps the e-stop latched and says
    why in one line; the control loop goes on holding instead of ending."""
    robot = make_robot()
    node = Node(make_bus("robot_node"))
    estop = EStopTopic(node, robot, topic)
    operator = Node(make_bus("operator"))
    pub = operator.create_publisher(topic, "std_msgs/msg/Bool", LATCHED)
    bool_msg = operator.codec.msg_class("std_msgs/msg/Bool")
    pub.publish(bool_msg(data=True))
    assert wait_until(lambda: robot.estopped, 5.0)

    def refuse() -> None:
        raise RobotError("the user stop is pressed: release the user stop, then clear the e-stop")

    monkeypatch.setattr(robot, "clear_estop", refuse)
    pub.publish(bool_msg(data=False))
    with caplog.at_level(logging.ERROR):
        assert wait_until(lambda: not estop.apply_pending() and "stays latched" in caplog.text, 5.0)
    assert robot.estopped and robot.step(PUSH).held
