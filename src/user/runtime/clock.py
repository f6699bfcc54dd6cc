"""`NodeClock`: the time a node stamps its messages with: the wall clock, or, in a deployment whose simulated robot
publishes its simulation time (`clock_topic`), that time, as ROS 2 nodes with `use_sim_time` read `/clock`.

`user bringup` and the launch file set `USER_SIM_CLOCK=<topic>` for every node of such a deployment
(`sim_clock_topic`). Before the first clock message a node stamps 0, as an rclpy node on simulation time does, so no
wall-clock stamp ever mixes with simulation time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from user.bus.base import BEST_EFFORT
from user.interfaces.stamps import from_time, now_ns

if TYPE_CHECKING:
    from user.runtime.node import Node

ENV_SIM_CLOCK = "USER_SIM_CLOCK"


def sim_clock_topic(nodes: list[tuple[str, Mapping[str, Any]]]) -> str:
    """The simulation clock topic of a deployment, from its (kind, params) nodes: the first robot node's
    `clock_topic` ('' = none; a pedal's `clock_topic` is where it reads the time, not a source)."""
    for kind, params in nodes:
        topic = params.get("clock_topic") if kind == "robot" else None
        if isinstance(topic, str) and topic:
            return topic
    return ""


class NodeClock:
    """`now_ns()`: the wall clock, or the latest time heard on the simulation clock topic."""

    def __init__(self, node: Node, env: Mapping[str, str] | None = None) -> None:
        self.topic = (os.environ if env is None else env).get(ENV_SIM_CLOCK, "")
        self._lock = threading.Lock()
        self._sim_ns = 0
        if self.topic:
            node.create_subscription(self.topic, "rosgraph_msgs/msg/Clock", self._on_clock, BEST_EFFORT)

    def _on_clock(self, msg: Any) -> None:
        with self._lock:
            self._sim_ns = from_time(msg.clock)

    def now_ns(self) -> int:
        if not self.topic:
            return now_ns()
        with self._lock:
            return self._sim_ns
