"""A stand-in for cv2.VideoCapture on local cameras (this machine has none), behaving as OpenCV's V4L2 backend.

- Open parameters: V4L2 is a static backend without a parameterised open, so VideoCapture applies the params
  through `setProperty`; V4L2 refuses `CAP_PROP_OPEN_TIMEOUT_MSEC`/`CAP_PROP_READ_TIMEOUT_MSEC`, the open raises
  "VIDEOIO: Failed to apply invalid or unsupported parameter", cap.cpp logs it and skips the backend: the
  capture is not opened (opencv modules/videoio/src/backend_static.cpp applyParametersFallback, cap.cpp open).
- FFmpeg cannot capture by index: an index with CAP_FFMPEG does not open (cap.cpp: "backend is generally
  available but can't be used to capture by index").
- A missing device node does not open (cap_v4l.cpp CvCaptureCAM_V4L::open: "can't open camera by index").
- An unplug: VIDIOC_DQBUF fails with ENODEV, so read() returns (False, None) on that capture forever, even once
  the camera is back (cap_v4l.cpp read_frame_v4l2); only a new capture opens it again.
"""

from __future__ import annotations

import threading
from typing import Any

import cv2
import numpy as np

# properties CvCaptureCAM_V4L::setProperty accepts (a subset: what the driver sets); 53/54 are not among them
V4L2_SETTABLE = {cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT, cv2.CAP_PROP_FPS, cv2.CAP_PROP_BUFFERSIZE}


class V4L2Device:
    """One /dev/videoN: plugged in or not; each replug is a new device instance (`generation`)."""

    def __init__(self, rate_hz: float = 100.0, width: int = 16, height: int = 12) -> None:
        self.rate_hz = rate_hz
        self.shape = (height, width, 3)
        self.plugged = True
        self.generation = 0
        self.opens = 0
        self.frames = 0
        self._pace = threading.Event()  # never set: the device's frame period, as a bounded wait

    def unplug(self) -> None:
        self.plugged = False

    def replug(self) -> None:
        self.generation += 1
        self.plugged = True

    def next_frame(self) -> np.ndarray:
        self._pace.wait(1.0 / self.rate_hz)
        self.frames += 1
        return np.full(self.shape, self.frames % 256, dtype=np.uint8)  # BGR


class StandInCapture:
    """cv2.VideoCapture(source, apiPreference, params) for the local cameras in `devices` (index -> device)."""

    devices: dict[int, V4L2Device] = {}
    refused: list[str] = []  # why opens failed, as OpenCV would log them

    def __init__(self, source: int | str, api: int = cv2.CAP_ANY, params: Any = ()) -> None:
        self._device: V4L2Device | None = None
        self._generation = -1
        index = source if isinstance(source, int) else _index_of(source)
        if index is None:
            raise AssertionError(f"the V4L2 stand-in only plays local cameras, not {source!r}")
        props = list(params)[0::2]
        if api not in (cv2.CAP_ANY, cv2.CAP_V4L2):
            self.refused.append(f"backend {api} can't be used to capture by index")
            return
        unsupported = [p for p in props if p not in V4L2_SETTABLE]
        if unsupported:
            self.refused.append(f"VIDEOIO(V4L2): Failed to apply invalid or unsupported parameter: [{unsupported[0]}]")
            return
        device = self.devices.get(index)
        if device is None or not device.plugged:
            self.refused.append(f"VIDEOIO(V4L2:/dev/video{index}): can't open camera by index")
            return
        device.opens += 1
        self._device, self._generation = device, device.generation

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return self._device is not None

    def read(self) -> tuple[bool, np.ndarray | None]:
        device = self._device
        if device is None or not device.plugged or device.generation != self._generation:
            return False, None
        return True, device.next_frame()

    def set(self, prop: int, value: float) -> bool:
        return self._device is not None and prop in V4L2_SETTABLE

    def release(self) -> None:
        self._device = None


def _index_of(path: str) -> int | None:
    tail = path.removeprefix("/dev/video")
    return int(tail) if tail != path and tail.isdigit() else None
