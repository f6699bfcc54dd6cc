"""Demo talker and listener (std_msgs/String), the smallest deployment that exercises the runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from user.bus.base import Bus
from user.config.strict import setting
from user.runtime.node import Node


@dataclass
class TalkerParams:
    topic: str = setting("/chatter", "topic to publish on")
    rate_hz: float = setting(2.0, "messages per second", min=0.01, max=10_000.0, live=True)
    text: str = setting("Hello World", "text before the counter", live=True)


class Talker(Node):
    """Publishes "<text>: <n>" on a timer, like demo_nodes_py's talker."""

    Params = TalkerParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        self.params = self.declare_parameters(TalkerParams, on_change=self._on_change)
        self.count = 0
        self._string = self.codec.msg_class("std_msgs/msg/String")
        self._pub = self.create_publisher(self.params.topic, "std_msgs/msg/String")
        self._timer = self.create_timer(1.0 / self.params.rate_hz, self._tick)

    def _on_change(self, params: TalkerParams) -> None:
        """`rate_hz` and `text` change while the talker runs (`ros2 param set /talker rate_hz 10.0`)."""
        if params.rate_hz != self.params.rate_hz:
            self._timer.close()
            self._timer = self.create_timer(1.0 / params.rate_hz, self._tick)
        self.params = params

    def _tick(self) -> None:
        text = f"{self.params.text}: {self.count}"
        self._pub.publish(self._string(data=text))
        self.log.info('Publishing: "%s"', text)
        self.count += 1


@dataclass
class ListenerParams:
    topic: str = setting("/chatter", "topic to listen on")


class Listener(Node):
    """Logs every std_msgs/String it hears."""

    Params = ListenerParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        self.params = self.declare_parameters(ListenerParams)
        self.heard = 0
        self.create_subscription(self.params.topic, "std_msgs/msg/String", self._on_message)

    def _on_message(self, msg: Any) -> None:
        self.heard += 1
        self.log.info('I heard: "%s"', msg.data)
