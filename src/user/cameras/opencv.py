"""`OpenCVCamera`: a USB/V4L2 camera by index, a video file, or a stream URL, through cv2.VideoCapture."""

from __future__ import annotations

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


class OpenCVCamera(Camera):
    """Frames from `cv2.VideoCapture(config.device)`.

    `device` is an index ("0") for a local camera, else a file path or URL. A video file is played at
    `rate_hz` (not as fast as it decodes) and ends the stream at its end unless `loop` is set. OpenCV gives
    no capture time for these sources, so frames carry their arrival time only. The open is bounded by
    `open_timeout_s` (OpenCV's own open/read timeouts are set too, for backends that honour them).
    """

    def __init__(
        self, config: CameraConfig, clock: Clock = time.monotonic, wall_clock: WallClock = time.time_ns
    ) -> None:
        super().__init__(config, clock, wall_clock)
        device = config.device.strip()
        self._index: int | None = int(device) if device.isdigit() else None
        self._is_file = self._index is None and Path(device).is_file()
        self.paced = self._is_file
        self._capture: Any = None

    def describe_device(self) -> str:
        if self._index is not None:
            return f"video device {self._index}"
        return f"video file {self.config.device}" if self._is_file else f"video stream {self.config.device}"

    def _open_device(self) -> None:
        source: int | str = self._index if self._index is not None else self.config.device
        timeout_ms = int(self.config.open_timeout_s * 1000)
        params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, timeout_ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, timeout_ms]
        capture = cv2.VideoCapture(source, cv2.CAP_ANY, params)
        if not capture.isOpened():
            capture.release()
            hint = "is it plugged in and not used by another program?" if self._index is not None else "does it exist?"
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
            if not self._is_file:
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
