"""What a robot is told about who serves it (`<ns>/assignment`, std_msgs/String, latched): a rollout that admits robots
at run time says "served by <rollout>" once it takes the robot, or "waiting: <why>" while it cannot (it is full, or
the robot is at another site). The robot logs each change in one line; while it waits no actions come and it holds."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from user.bus.base import LATCHED

if TYPE_CHECKING:
    from user.runtime.node import Node


class Assignment:
    """The latest word on who serves this robot."""

    def __init__(self, node: Node, namespace: str) -> None:
        self.log = node.log
        self.text = ""  # the latest message: "" until a rollout said anything
        self._lock = threading.Lock()
        node.create_subscription(f"{namespace}/assignment", "std_msgs/msg/String", self._on, LATCHED)

    def _on(self, msg: Any) -> None:
        text = str(msg.data)
        with self._lock:
            if text == self.text:
                return
            self.text = text
        if text.startswith("waiting"):
            self.log.warning("no rollout acts for this robot yet, it holds: %s", text)
        else:
            self.log.info("%s", text)
