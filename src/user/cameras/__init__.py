"""Cameras: the newest frame of each camera, time-stamped, never blocking the control loop.

`Camera` drivers (OpenCV, RealSense, a bus topic, any `FrameSource` such as the simulator) capture in
their own daemon thread and keep only the newest `Frame`; `latest(max_age_s)` hands it out at once or
raises a `StaleFrameError`, `poll` flags it `stale` instead. See `user.cameras.camera`.
"""

from user.cameras.bus_camera import BusCamera
from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.errors import (
    CameraDeadError,
    CameraError,
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
from user.cameras.processing import encode_frame
from user.cameras.realsense import RealSenseCamera
from user.cameras.source import SourceCamera

__all__ = [
    "RGB",
    "BusCamera",
    "Camera",
    "CameraConfig",
    "CameraDeadError",
    "CameraError",
    "CameraHealth",
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
    "encode_frame",
]
