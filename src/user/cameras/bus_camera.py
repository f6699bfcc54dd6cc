"""`BusCamera`: the newest image of a sensor_msgs Image/CompressedImage topic, e.g. realsense2_camera's.

The bus callback only parks the message bytes in a one-slot mailbox (a message replaced there before the
capture thread took it counts as dropped); decoding and pixel conversion happen in the capture thread,
so a busy camera never slows the other callbacks of the node.
"""

from __future__ import annotations

import threading
import time

from user.bus.base import BEST_EFFORT, Bus, Handle
from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.errors import CameraOpenError, FrameFormatError
from user.cameras.frame import Grab
from user.cameras.latest import Clock, WallClock
from user.cameras.ros_image import ImageMessageError, msg_to_rgb
from user.interfaces.codec import Codec, DecodeError, default_codec


class BusCamera(Camera):
    """Frames from `config.topic` on `bus` (best effort: the newest image is what matters).

    The header stamp of each message (the driver's capture time; realsense2_camera stamps with the
    device's clock mapped to ROS time) is the frame's hardware stamp; a zero stamp counts as none.
    """

    def __init__(
        self,
        config: CameraConfig,
        bus: Bus,
        codec: Codec | None = None,
        clock: Clock = time.monotonic,
        wall_clock: WallClock = time.time_ns,
    ) -> None:
        super().__init__(config, clock, wall_clock)
        self.bus = bus
        self.codec = codec or default_codec()
        self.typename = self.codec.resolve(config.image_type)
        self._mailbox = threading.Condition()
        self._pending: bytes | None = None
        self._subscription: Handle | None = None

    def describe_device(self) -> str:
        return f"topic {self.config.topic} ({self.typename})"

    def open(self) -> None:
        if self.is_open:
            return
        with self._mailbox:
            self._pending = None
        try:
            self._subscription = self.bus.create_subscription(
                self.config.topic, self.typename, self._on_message, BEST_EFFORT
            )
        except Exception as exc:
            raise CameraOpenError(self.name, f"cannot subscribe to {self.describe_device()}: {exc}") from exc
        try:
            super().open()
        except BaseException:
            self._unsubscribe()
            raise

    def close(self) -> None:
        self._unsubscribe()
        super().close()

    def _unsubscribe(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.close()
        with self._mailbox:
            self._mailbox.notify_all()

    def _on_message(self, payload: bytes) -> None:
        with self._mailbox:
            replaced = self._pending is not None
            self._pending = payload
            self._mailbox.notify()
        if replaced:
            self._frames.count_dropped(1)

    def _open_device(self) -> None:
        """Nothing to do: the subscription is made in `open`, in the caller's thread."""

    def _grab(self, timeout_s: float) -> Grab | None:
        with self._mailbox:
            if self._pending is None:
                self._mailbox.wait(timeout_s)
            payload, self._pending = self._pending, None
        if payload is None:
            return None
        try:
            return msg_to_rgb(self.codec.decode(payload, self.typename), self.typename)
        except (DecodeError, ImageMessageError) as exc:
            raise FrameFormatError(self.name, f"bad message on {self.config.topic}: {exc}") from exc

    def _close_device(self) -> None:
        """Nothing to do: `close` removes the subscription."""
