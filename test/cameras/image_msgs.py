"""Image messages as camera drivers publish them (realsense2_camera, image_transport's compressed plugin): what
the stand-ins and the tests of `user.cameras.ros_image` and `BusCamera` send."""

from __future__ import annotations

from typing import Any

import numpy as np

from user.cameras.frame import RGB
from user.interfaces.codec import Codec
from user.interfaces.images import encode_jpeg
from user.interfaces.stamps import header


def rgb_to_image_msg(rgb: RGB, stamp_ns: int, frame_id: str, codec: Codec) -> Any:
    """A sensor_msgs/msg/Image (rgb8) of `rgb`."""
    height, width = int(rgb.shape[0]), int(rgb.shape[1])
    return codec.msg_class("sensor_msgs/msg/Image")(
        header=header(stamp_ns, frame_id, codec),
        height=height,
        width=width,
        encoding="rgb8",
        is_bigendian=0,
        step=width * 3,
        data=np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1),
    )


def rgb_to_compressed_msg(rgb: RGB, stamp_ns: int, frame_id: str, codec: Codec, quality: int = 90) -> Any:
    """A sensor_msgs/msg/CompressedImage (JPEG) of `rgb`."""
    data = np.frombuffer(encode_jpeg(np.ascontiguousarray(rgb), quality), dtype=np.uint8)
    return codec.msg_class("sensor_msgs/msg/CompressedImage")(
        header=header(stamp_ns, frame_id, codec), format="jpeg", data=data
    )
