"""The e-stop topic: a `std_msgs/msg/Bool` that latches a robot's hold until it is explicitly cleared.

`true` stops at once (from the bus thread: the arm's e-stop latch is a flag the control loop checks each
step). `false` asks to clear; the clear is carried out by the control loop (`apply_pending`), because
clearing re-reads the arm's state and only the control loop may touch the device. The subscription is
latched: publish the e-stop state with a latched publisher (QoS LATCHED / transient local), and a robot node
that starts after the stop was published starts stopped.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from user.bus.base import LATCHED, Handle
from user.robots.arm import ArmRobot
from user.robots.base import RobotError
from user.runtime.node import Node

ESTOP_TOPIC = "/estop"  # default topic; a deployment may give each robot its own


class EStopTopic:
    """Connects an e-stop topic to one arm's latch."""

    def __init__(self, node: Node, robot: ArmRobot, topic: str = ESTOP_TOPIC) -> None:
        self._robot = robot
        self._topic = topic
        self._clear_requested = threading.Event()
        self._log = logging.getLogger(f"user.estop.{robot.descriptor.robot_id}")
        self._sub: Handle = node.create_subscription(topic, "std_msgs/msg/Bool", self._on_message, LATCHED)

    def _on_message(self, msg: Any) -> None:
        if bool(msg.data):
            self._clear_requested.clear()
            self._robot.estop(f"e-stop pressed on {self._topic}")
        elif self._robot.estopped:
            self._log.warning("e-stop release requested on %s; clearing at the next control period", self._topic)
            self._clear_requested.set()

    def apply_pending(self) -> bool:
        """Call from the control loop before stepping: carries out a requested clear. True if it cleared; a clear
        the robot refuses (its driver says why) keeps the latch, logged in one line."""
        if not self._clear_requested.is_set():
            return False
        self._clear_requested.clear()
        try:
            self._robot.clear_estop()
        except RobotError as exc:  # e.g. a Franka whose user stop is still pressed: the latch stays, the node runs
            self._log.error("the e-stop stays latched: %s", exc)
            return False
        return True

    def close(self) -> None:
        self._sub.close()
