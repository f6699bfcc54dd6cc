"""Cameras: the newest frame of each camera, time-stamped, never blocking the control loop.

`Camera` drivers (OpenCV, RealSense, a bus topic, any `FrameSource` such as the simulator) capture in
their own daemon thread and keep only the newest `Frame`; `latest(max_age_s)` hands it out at once or
raises a `StaleFrameError`, `poll` flags it `stale` instead. See `user.cameras.camera`.

The names below are imported from their modules when first used, so that reading a camera's settings
(`user.cameras.config`, e.g. for a robot node's `camera_configs`) loads no OpenCV.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time `__getattr__` imports each name when first used
    from user.cameras.bus_camera import BusCamera
    from user.cameras.camera import Camera
    from user.cameras.config import CameraConfig
    from user.cameras.errors import (
        CameraDeadError,
        CameraError,
        CameraLostError,
        CameraNotOpenError,
        CameraOpenError,
        CameraUnavailableError,
        EndOfStreamError,
        FrameFormatError,
        NoFrameError,
        StaleFrameError,
    )
    from user.cameras.factory import build_camera
    from user.cameras.frame import RGB, Frame, FrameSource, Grab, OpenableSource
    from user.cameras.latest import CameraHealth, LatestFrame
    from user.cameras.opencv import OpenCVCamera
    from user.cameras.realsense import RealSenseCamera
    from user.cameras.source import SourceCamera

_MODULE_OF = {
    "BusCamera": "bus_camera",
    "Camera": "camera",
    "CameraConfig": "config",
    "CameraDeadError": "errors",
    "CameraError": "errors",
    "CameraLostError": "errors",
    "CameraNotOpenError": "errors",
    "CameraOpenError": "errors",
    "CameraUnavailableError": "errors",
    "EndOfStreamError": "errors",
    "FrameFormatError": "errors",
    "NoFrameError": "errors",
    "StaleFrameError": "errors",
    "build_camera": "factory",
    "RGB": "frame",
    "Frame": "frame",
    "FrameSource": "frame",
    "Grab": "frame",
    "OpenableSource": "frame",
    "CameraHealth": "latest",
    "LatestFrame": "latest",
    "OpenCVCamera": "opencv",
    "RealSenseCamera": "realsense",
    "SourceCamera": "source",
}
__all__ = [
    "RGB",
    "BusCamera",
    "Camera",
    "CameraConfig",
    "CameraDeadError",
    "CameraError",
    "CameraHealth",
    "CameraLostError",
    "CameraNotOpenError",
    "CameraOpenError",
    "CameraUnavailableError",
    "EndOfStreamError",
    "Frame",
    "FrameFormatError",
    "FrameSource",
    "Grab",
    "LatestFrame",
    "NoFrameError",
    "OpenCVCamera",
    "OpenableSource",
    "RealSenseCamera",
    "SourceCamera",
    "StaleFrameError",
    "build_camera",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return __all__
