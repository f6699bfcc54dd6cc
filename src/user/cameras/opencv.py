"""`OpenCVCamera`: a USB/V4L2 camera by index or device path, a video file, or a stream URL, through
cv2.VideoCapture, each opened with the backend (and parameters) that backend accepts.

OpenCV's V4L2 backend takes no open parameters: VideoCapture applies any it is given through `setProperty`, and
V4L2 refuses the FFmpeg/GStreamer ones (`CAP_PROP_OPEN_TIMEOUT_MSEC`, `CAP_PROP_READ_TIMEOUT_MSEC`): "VIDEOIO:
Failed to apply invalid or unsupported parameter" (opencv modules/videoio/src/backend_static.cpp
applyParametersFallback), the backend is skipped and the camera never opens. So a local camera is opened with
`CAP_V4L2` on Linux (the platform's default backend elsewhere) and no parameters; its open is bounded by
`open_timeout_s` (the capture thread opens it, `Camera.open` waits at most that long) and a read that hangs shows
as a dead camera after `dead_after_periods` (V4L2 itself gives up a read after 10 s: cap_v4l.cpp tryIoctl's
select). Files and URLs go to FFmpeg, which honours both timeouts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.errors import CameraError, CameraOpenError, EndOfStreamError
from user.cameras.frame import Grab
from user.cameras.latest import Clock, WallClock

V4L2_PATHS = ("/dev/video", "/dev/v4l/")  # a local camera named by its device node (by-id paths survive replugs)


def capture_args(device: str, open_timeout_s: float, read_timeout_s: float) -> tuple[int | str, int, list[int]]:
    """`(source, backend, params)` for cv2.VideoCapture: a local camera (index or device path) on V4L2 (Linux)
    without parameters, anything else on FFmpeg with its open and read timeouts."""
    device = device.strip()
    local: int | str | None = int(device) if device.isdigit() else None
    if local is None and device.startswith(V4L2_PATHS):
        local = device
    if local is not None:
        return local, cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY, []
    params = [
        cv2.CAP_PROP_OPEN_TIMEOUT_MSEC,
        max(1, round(open_timeout_s * 1000)),
        cv2.CAP_PROP_READ_TIMEOUT_MSEC,
        max(1, round(read_timeout_s * 1000)),
    ]
    return device, cv2.CAP_FFMPEG, params


class OpenCVCamera(Camera):
    """Frames from `cv2.VideoCapture(config.device)`.

    `device` is an index ("0") or a device path ("/dev/v4l/by-id/...") for a local camera, else a file path or
    URL. A video file is played at `rate_hz` (not as fast as it decodes) and ends the stream at its end unless
    `loop` is set. OpenCV gives no capture time for these sources, so frames carry their arrival time only.
    A local camera or stream that stops delivering (unplugged: V4L2 reads fail for good) is reopened.
    """

    def __init__(
        self, config: CameraConfig, clock: Clock = time.monotonic, wall_clock: WallClock = time.time_ns
    ) -> None:
        super().__init__(config, clock, wall_clock)
        read_timeout_s = max(1.0, config.dead_after_periods * config.period_s)
        self._source, self._backend, self._params = capture_args(config.device, config.open_timeout_s, read_timeout_s)
        self._is_local = self._backend != cv2.CAP_FFMPEG
        self._is_file = not self._is_local and Path(config.device.strip()).is_file()
        self.paced = self._is_file
        self.reopens = not self._is_file
        self._capture: Any = None

    def describe_device(self) -> str:
        if self._is_local:
            return f"video device {self._source}"
        return f"video file {self.config.device}" if self._is_file else f"video stream {self.config.device}"

    def _open_device(self) -> None:
        capture = cv2.VideoCapture(self._source, self._backend, self._params)
        if not capture.isOpened():
            capture.release()
            hint = (
                "is it plugged in, readable by this user (group video) and not used by another program?"
                if self._is_local
                else "does it exist, and can FFmpeg read it?"
            )
            raise CameraOpenError(self.name, f"OpenCV cannot open {self.describe_device()}; {hint}")
        if not self._is_file:
            self._request(capture)
        self._capture = capture

    def _request(self, capture: Any) -> None:
        """Ask a live device for the configured size and rate (it may pick the nearest it supports)."""
        if self.config.width:
            capture.set(cv2.CAP_PROP_FRAME_WIDTH, self.config.width)
        if self.config.height:
            capture.set(cv2.CAP_PROP_FRAME_HEIGHT, self.config.height)
        capture.set(cv2.CAP_PROP_FPS, self.config.rate_hz)
        capture.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # keep the driver queue short: we want the newest frame

    def _grab(self, timeout_s: float) -> Grab | None:
        capture = self._capture
        ok, bgr = capture.read()
        if not ok or bgr is None:
            if not self._is_file:  # counted; a device that keeps failing goes silent and is reopened
                raise CameraError(self.name, f"reading from {self.describe_device()} failed")
            if not self.config.loop:
                raise EndOfStreamError(self.name, f"{self.describe_device()} reached its end")
            capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
            return None
        if bgr.ndim == 2:
            return np.asarray(cv2.cvtColor(bgr, cv2.COLOR_GRAY2RGB), dtype=np.uint8), None
        return np.asarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), dtype=np.uint8), None

    def _close_device(self) -> None:
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.release()
