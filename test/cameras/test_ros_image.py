"""Image message <-> RGB conversion, through real CDR encoding."""

from __future__ import annotations

import numpy as np
import pytest

from test.cameras.image_msgs import rgb_to_compressed_msg, rgb_to_image_msg
from user.cameras.ros_image import ImageMessageError, image_msg_to_rgb, msg_to_rgb
from user.interfaces.codec import default_codec
from user.interfaces.stamps import header

CODEC = default_codec()
RGB_PIXELS = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)


def roundtrip(msg: object, typename: str) -> object:
    return CODEC.decode(CODEC.encode(msg, typename), typename)


def image(encoding: str, pixels: np.ndarray, step_pad: int = 0) -> object:
    height, width = pixels.shape[:2]
    rows = pixels.reshape(height, -1)
    padded = np.zeros((height, rows.shape[1] + step_pad), dtype=np.uint8)
    padded[:, : rows.shape[1]] = rows
    msg = CODEC.msg_class("sensor_msgs/msg/Image")(
        header=header(5, "cam", CODEC),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=0,
        step=padded.shape[1],
        data=padded.reshape(-1),
    )
    return roundtrip(msg, "sensor_msgs/msg/Image")


@pytest.mark.parametrize(
    ("encoding", "pixels"),
    [
        ("rgb8", RGB_PIXELS),
        ("bgr8", RGB_PIXELS[:, :, ::-1]),
        ("8UC3", RGB_PIXELS[:, :, ::-1]),
        ("rgba8", np.concatenate([RGB_PIXELS, np.full((4, 5, 1), 255, np.uint8)], axis=2)),
        ("bgra8", np.concatenate([RGB_PIXELS[:, :, ::-1], np.full((4, 5, 1), 255, np.uint8)], axis=2)),
    ],
)
def test_colour_encodings(encoding: str, pixels: np.ndarray) -> None:
    assert np.array_equal(image_msg_to_rgb(image(encoding, np.ascontiguousarray(pixels), step_pad=3)), RGB_PIXELS)


def test_mono_becomes_grey_rgb() -> None:
    grey = RGB_PIXELS[:, :, 0]
    rgb = image_msg_to_rgb(image("mono8", grey[:, :, None]))
    assert rgb.shape == (4, 5, 3) and np.array_equal(rgb[:, :, 1], grey)


def test_unsupported_and_truncated_images_are_refused() -> None:
    with pytest.raises(ImageMessageError, match="'16UC1' is not supported"):
        image_msg_to_rgb(image("16UC1", RGB_PIXELS))
    msg = image("rgb8", RGB_PIXELS)
    msg.height = 40  # type: ignore[attr-defined]
    with pytest.raises(ImageMessageError, match="does not fit its 60 data bytes"):
        image_msg_to_rgb(msg)


def test_round_trips_with_stamps() -> None:
    rgb, stamp = msg_to_rgb(roundtrip(rgb_to_image_msg(RGB_PIXELS, 7, "cam", CODEC), "sensor_msgs/msg/Image"), "Image")
    assert np.array_equal(rgb, RGB_PIXELS) and stamp == 7
    flat = np.full((16, 16, 3), 120, dtype=np.uint8)
    compressed = roundtrip(rgb_to_compressed_msg(flat, 0, "cam", CODEC), "sensor_msgs/msg/CompressedImage")
    rgb, stamp = msg_to_rgb(compressed, "sensor_msgs/msg/CompressedImage")
    assert stamp is None and np.abs(rgb.astype(int) - 120).max() <= 2
    compressed.data = np.frombuffer(b"not a jpeg", dtype=np.uint8)  # type: ignore[attr-defined]
    with pytest.raises(ImageMessageError, match="jpeg image: cannot decode"):
        msg_to_rgb(compressed, "sensor_msgs/msg/CompressedImage")
