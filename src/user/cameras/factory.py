"""`build_camera`: the driver named by a `CameraConfig`."""

from __future__ import annotations

from user.bus.base import Bus
from user.cameras.bus_camera import BusCamera
from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.errors import CameraUnavailableError
from user.cameras.frame import FrameSource
from user.cameras.opencv import OpenCVCamera
from user.cameras.realsense import RealSenseCamera
from user.cameras.source import SourceCamera
from user.interfaces.codec import Codec


def build_camera(
    config: CameraConfig, *, bus: Bus | None = None, source: FrameSource | None = None, codec: Codec | None = None
) -> Camera:
    """A closed camera of `config.driver`. `bus` is needed by driver 'bus', `source` by driver 'source'."""
    if config.driver == "opencv":
        return OpenCVCamera(config)
    if config.driver == "realsense":
        return RealSenseCamera(config)
    if config.driver == "bus":
        if bus is None:
            raise CameraUnavailableError(config.name, "driver 'bus' needs the node's bus; none was given")
        return BusCamera(config, bus, codec)
    if source is None:
        raise CameraUnavailableError(config.name, "driver 'source' needs a frame source (e.g. the simulator's)")
    return SourceCamera(config, source)
