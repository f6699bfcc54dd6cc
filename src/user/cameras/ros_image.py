"""sensor_msgs/Image and sensor_msgs/CompressedImage -> HxWx3 uint8 RGB (ROS-free, through the codec)."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from user.cameras.frame import RGB
from user.interfaces.images import ImageCodecError, decode_image
from user.interfaces.stamps import from_time

# encoding -> (channels, OpenCV conversion to RGB or None when already RGB)
_ENCODINGS: dict[str, tuple[int, int | None]] = {
    "rgb8": (3, None),
    "bgr8": (3, cv2.COLOR_BGR2RGB),
    "rgba8": (4, cv2.COLOR_RGBA2RGB),
    "bgra8": (4, cv2.COLOR_BGRA2RGB),
    "mono8": (1, cv2.COLOR_GRAY2RGB),
    "8UC1": (1, cv2.COLOR_GRAY2RGB),
    "8UC3": (3, cv2.COLOR_BGR2RGB),  # OpenCV's default channel order
}
SUPPORTED_ENCODINGS = tuple(_ENCODINGS)


class ImageMessageError(ValueError):
    """An image message cannot be turned into RGB pixels (unsupported encoding, wrong size, bad data)."""


def image_msg_to_rgb(msg: Any) -> RGB:
    """Pixels of a sensor_msgs/msg/Image with an 8-bit colour or mono encoding (row padding allowed)."""
    encoding = str(msg.encoding)
    if encoding not in _ENCODINGS:
        raise ImageMessageError(
            f"image encoding {encoding!r} is not supported (supported: {', '.join(SUPPORTED_ENCODINGS)})"
        )
    channels, conversion = _ENCODINGS[encoding]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    data = np.asarray(msg.data, dtype=np.uint8)
    if height <= 0 or width <= 0 or step < width * channels or data.size < step * height:
        raise ImageMessageError(
            f"{encoding} image of {width}x{height} with step {step} does not fit its {data.size} data bytes"
        )
    rows = data[: step * height].reshape(height, step)[:, : width * channels]
    pixels = np.ascontiguousarray(rows.reshape(height, width, channels))
    if conversion is None:
        return pixels
    return np.asarray(cv2.cvtColor(pixels, conversion), dtype=np.uint8)


def compressed_msg_to_rgb(msg: Any) -> RGB:
    """Pixels of a sensor_msgs/msg/CompressedImage (JPEG or PNG)."""
    try:
        return decode_image(np.asarray(msg.data, dtype=np.uint8).tobytes())
    except ImageCodecError as exc:
        raise ImageMessageError(f"{msg.format or 'compressed'} image: {exc}") from exc


def msg_to_rgb(msg: Any, typename: str) -> tuple[RGB, int | None]:
    """(pixels, header stamp in ns or None when unset) of an Image or CompressedImage message."""
    rgb = compressed_msg_to_rgb(msg) if typename.endswith("CompressedImage") else image_msg_to_rgb(msg)
    stamp = from_time(msg.header.stamp)
    return rgb, (stamp if stamp > 0 else None)
