"""`RealSenseCamera`: the colour stream of an Intel RealSense through pyrealsense2 (imported lazily).

On ROS sites prefer realsense2_camera and a `bus` camera on its topic. Frames carry the device's
hardware capture time when librealsense maps it onto the host clock ("global time", computed from the
frame metadata timestamp; switched on here where the sensor supports it); otherwise they carry arrival
time only. Gaps in the device frame counter are counted as dropped frames.

A D405 has no RGB camera module: its colour stream comes from the stereo (depth) module, and
`first_color_sensor()` raises "Could not find requested sensor type!" (librealsense
include/librealsense2/hpp/rs_device.hpp `device::first`); global time is then switched on on the depth sensor.

An unplugged device: librealsense's `try_wait_for_frames` tries once to restart the pipeline, and when that
fails it stops it, so every later call raises "try_wait_for_frames cannot be called before start()"
(src/pipeline/pipeline.cpp). That is a `CameraLostError`: the capture thread closes and reopens the device
(`Camera`, `reopen_timeout_s`); a device that just goes quiet is reopened after `dead_after_periods` too.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.errors import CameraLostError, CameraOpenError, CameraUnavailableError
from user.cameras.frame import Grab
from user.cameras.latest import Clock, WallClock

_log = logging.getLogger(__name__)
PIP_PACKAGE = "pyrealsense2"


def import_pyrealsense2(camera: str) -> Any:
    """The pyrealsense2 module, or `CameraUnavailableError` saying what to install."""
    try:
        import pyrealsense2
    except ImportError as exc:
        raise CameraUnavailableError(
            camera,
            f"the realsense driver needs the {PIP_PACKAGE!r} Python package, which is not installed "
            f"(pip install {PIP_PACKAGE}); on a ROS 2 site run realsense2_camera and use driver: bus instead",
        ) from exc
    return pyrealsense2


class RealSenseCamera(Camera):
    """Colour frames (rgb8) of the RealSense with serial `config.serial` (or the first one found)."""

    reopens = True

    def __init__(
        self, config: CameraConfig, clock: Clock = time.monotonic, wall_clock: WallClock = time.time_ns
    ) -> None:
        super().__init__(config, clock, wall_clock)
        self._rs = import_pyrealsense2(config.name)
        self._pipeline: Any = None
        self._last_number: int | None = None
        self._warned_clock = False

    def describe_device(self) -> str:
        return f"RealSense {self.config.serial}" if self.config.serial else "the first RealSense found"

    def _serials(self) -> list[str]:
        rs = self._rs
        return [str(d.get_info(rs.camera_info.serial_number)) for d in rs.context().query_devices()]

    def _open_device(self) -> None:
        rs = self._rs
        serials = self._serials()
        if not serials or (self.config.serial and self.config.serial not in serials):
            found = ", ".join(serials) if serials else "none"
            raise CameraOpenError(self.name, f"{self.describe_device()} is not connected (RealSense devices: {found})")
        rs_config = rs.config()
        if self.config.serial:
            rs_config.enable_device(self.config.serial)
        rs_config.enable_stream(
            rs.stream.color, self.config.width, self.config.height, rs.format.rgb8, round(self.config.rate_hz)
        )
        pipeline = rs.pipeline()
        try:
            profile = pipeline.start(rs_config)
        except RuntimeError as exc:
            raise CameraOpenError(
                self.name,
                f"cannot start the colour stream of {self.describe_device()} at {self.config.width}x"
                f"{self.config.height} {self.config.rate_hz:g} Hz (0 = device default): {exc}",
            ) from exc
        try:
            self._enable_global_time(profile.get_device())
        except RuntimeError as exc:  # not fatal: frames then carry their arrival time (warned at the first frame)
            _log.warning("camera %r: cannot switch on global time on %s: %s", self.name, self.describe_device(), exc)
        self._pipeline = pipeline
        self._last_number = None

    def _enable_global_time(self, device: Any) -> None:
        """Ask the sensor that streams colour for host-synchronised time stamps, where it supports them."""
        rs = self._rs
        try:
            sensor = device.first_color_sensor()
        except RuntimeError:  # a D405: colour comes from the stereo (depth) module
            sensor = device.first_depth_sensor()
        if sensor.supports(rs.option.global_time_enabled):
            sensor.set_option(rs.option.global_time_enabled, 1)

    def _grab(self, timeout_s: float) -> Grab | None:
        try:
            ok, frames = self._pipeline.try_wait_for_frames(max(1, int(timeout_s * 1000)))
        except RuntimeError as exc:  # the pipeline stopped itself after its device vanished
            raise CameraLostError(self.name, f"{self.describe_device()} stopped streaming: {exc}") from exc
        if not ok:
            return None
        color = frames.get_color_frame()
        if not color:
            return None
        self._count_gap(int(color.get_frame_number()))
        rgb = np.array(np.asanyarray(color.get_data()), dtype=np.uint8, copy=True)  # the SDK reuses its buffers
        return rgb, self._hardware_stamp(color)

    def _count_gap(self, number: int) -> None:
        last, self._last_number = self._last_number, number
        if last is not None and number > last + 1:
            self._frames.count_dropped(number - last - 1)

    def _hardware_stamp(self, color: Any) -> int | None:
        rs = self._rs
        if color.get_frame_timestamp_domain() == rs.timestamp_domain.global_time:
            return round(float(color.get_timestamp()) * 1_000_000)  # ms -> ns
        if not self._warned_clock:
            self._warned_clock = True
            _log.warning(
                "camera %r: %s gives no host-synchronised hardware time stamps (domain %s); frames carry "
                "their arrival time",
                self.name,
                self.describe_device(),
                color.get_frame_timestamp_domain(),
            )
        return None

    def _close_device(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is None:
            return
        try:
            pipeline.stop()
        except RuntimeError as exc:  # "stop() cannot be called before start()": librealsense already stopped it
            _log.debug("camera %r: %s", self.name, exc)
