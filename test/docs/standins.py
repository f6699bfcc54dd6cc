"""What stands in for the hardware of a guide while its runnable blocks run: the stand-ins of the driver tests,
on the guide's own buses (its domain, the test router).

- franka_ros2: `Franka2StandIn` of test/robots/test_franka_ros.py on franka_ros2's own topic names;
- realsense2_camera: rgb8 sensor_msgs/msg/Image at 30 Hz on its colour topic, as realsense2_camera publishes it.

franky-sim (the libfranka protocol) and the keyboard's terminal are not stand-ins of the test: the guides start
franky-sim themselves, and every command gets a pseudo-terminal (`test.docs.terminal`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from test.cameras.image_msgs import rgb_to_image_msg
from test.robots.test_franka_ros import Franka2StandIn
from user.bus.base import RELIABLE, Bus
from user.runtime.node import Node

REALSENSE_COLOR_TOPIC = "/camera/camera/color/image_raw"  # realsense2_camera >= 4.55.1: namespace camera, name camera
REALSENSE_RATE_HZ = 30.0


class RealSense2StandIn(Node):
    """Publishes a colour test pattern on realsense2_camera's colour topic, stamped like the driver does."""

    def __init__(self, bus: Bus, topic: str = REALSENSE_COLOR_TOPIC) -> None:
        super().__init__(bus)
        self.sent = 0
        self._rgb = np.zeros((48, 64, 3), np.uint8)
        self._rgb[..., 0] = np.arange(64, dtype=np.uint8)[None, :] * 4
        self._pub = self.create_publisher(topic, "sensor_msgs/msg/Image", RELIABLE)
        self.create_timer(1.0 / REALSENSE_RATE_HZ, self._tick)

    def _tick(self) -> None:
        self._pub.publish(rgb_to_image_msg(self._rgb, time.time_ns(), "camera_color_optical_frame", self.codec))
        self.sent += 1


def franka_ros2(make_bus: Callable[[str], Bus]) -> Node:
    return Franka2StandIn(make_bus("franka_ros2_standin"), "")


def realsense2_camera(make_bus: Callable[[str], Bus]) -> Node:
    return RealSense2StandIn(make_bus("realsense2_camera_standin"))


# guide -> the stand-ins its runnable blocks run against
STANDINS: dict[str, tuple[Callable[[Callable[[str], Bus]], Node], ...]] = {
    "franka_ros2.md": (franka_ros2,),
    "realsense.md": (franka_ros2, realsense2_camera),
}
