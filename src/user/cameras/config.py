"""`CameraConfig`: one camera of the deployment, whatever its driver, as one typed object."""

from __future__ import annotations

from dataclasses import dataclass

from user.config import ConfigError, setting

DRIVERS = ("opencv", "realsense", "bus", "source")
IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")


@dataclass(frozen=True)
class CameraConfig:
    """How to reach one camera, what it should deliver, and when to call its frames stale or it dead."""

    name: str = setting("", "camera name, unique per robot; the frame_id of its images (e.g. wrist, front)")
    driver: str = setting(
        "opencv",
        "opencv: cv2.VideoCapture device or file; realsense: pyrealsense2 colour stream; bus: an Image or "
        "CompressedImage topic (realsense2_camera on ROS sites); source: frames from a FrameSource in code (sim)",
        choices=DRIVERS,
    )
    device: str = setting("", "opencv: device index ('0'), video file path or stream URL", when=("driver", "opencv"))
    loop: bool = setting(
        False, "opencv video file: start again at its end instead of ending the stream", when=("driver", "opencv")
    )
    serial: str = setting(
        "", "realsense: serial number of the device; empty: the first one found", when=("driver", "realsense")
    )
    topic: str = setting("", "bus: image topic, e.g. /camera/color/image_raw", when=("driver", "bus"))
    msg_type: str = setting(
        "",
        "bus: sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage; empty: CompressedImage when the "
        "topic ends in /compressed, else Image",
        when=("driver", "bus"),
    )
    rate_hz: float = setting(30.0, "expected frame rate, Hz (requested from the device; paces files)", min=0.1)
    width: int = setting(0, "requested device image width, pixels; 0: the device default", min=0)
    height: int = setting(0, "requested device image height, pixels; 0: the device default", min=0)
    crop: tuple[int, int, int, int] | None = setting(
        None, "region kept, (x, y, width, height) in device pixels, applied before resize; none: whole image"
    )
    resize: tuple[int, int] | None = setting(None, "(width, height) frames are resized to; none: keep the size")
    max_age_s: float = setting(
        0.1, "default oldest frame `latest` hands out, s; a required camera's older frame holds the robot", min=0.0
    )
    required: bool = setting(
        True,
        "true: the robot holds (sends no action) while this camera is dead or its newest frame is older than "
        "max_age_s; false: observations go on with whatever frame it last delivered",
    )
    dead_after_periods: int = setting(10, "frame periods without a frame before the camera is reported dead", min=2)
    open_timeout_s: float = setting(10.0, "longest wait for the device to open, s", min=0.1)
    reopen_timeout_s: float = setting(
        30.0,
        "opencv devices and streams, realsense: how long a device that stopped delivering (unplugged, reset) is "
        "closed and opened again, with growing pauses, before the camera is declared dead for good, s; 0: never",
        min=0.0,
    )
    close_timeout_s: float = setting(2.0, "longest wait for the capture thread to stop on close, s", min=0.1)

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("name: a camera needs a name")
        if not (self.rate_hz > 0.0 and self.open_timeout_s > 0.0 and self.close_timeout_s > 0.0):
            raise ConfigError(f"camera {self.name!r}: rate_hz and the timeouts must be positive")
        if self.driver == "bus" and not self.topic:
            raise ConfigError(f"camera {self.name!r}: driver 'bus' needs a topic")
        if self.driver == "opencv" and not self.device:
            raise ConfigError(f"camera {self.name!r}: driver 'opencv' needs a device (index, file or URL)")
        if self.msg_type and self.msg_type not in IMAGE_TYPES:
            raise ConfigError(
                f"camera {self.name!r}: msg_type {self.msg_type!r} is not one of {', '.join(IMAGE_TYPES)}"
            )
        if self.crop is not None and (min(self.crop[:2]) < 0 or min(self.crop[2:]) <= 0):
            raise ConfigError(f"camera {self.name!r}: crop {self.crop} needs x, y >= 0 and width, height > 0")
        if self.resize is not None and min(self.resize) <= 0:
            raise ConfigError(f"camera {self.name!r}: resize {self.resize} needs width, height > 0")

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz

    @property
    def image_type(self) -> str:
        """The message type a bus camera subscribes to."""
        if self.msg_type:
            return self.msg_type
        return IMAGE_TYPES[1] if self.topic.rstrip("/").endswith("/compressed") else IMAGE_TYPES[0]
