"""Per-camera image processing in the capture thread: check, crop, resize."""

from __future__ import annotations

import cv2
import numpy as np

from user.cameras.config import CameraConfig
from user.cameras.errors import FrameFormatError
from user.cameras.frame import RGB


def prepare(config: CameraConfig, image: object) -> RGB:
    """A private, read-only, contiguous copy of `image` with the configured crop and resize applied."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        dtype = getattr(image, "dtype", type(image).__name__)
        raise FrameFormatError(config.name, f"expected an HxWx3 uint8 RGB image, got {dtype} {shape}")
    rgb: RGB = image
    if config.crop is not None:
        x, y, w, h = config.crop
        if x + w > rgb.shape[1] or y + h > rgb.shape[0]:
            raise FrameFormatError(
                config.name, f"crop {config.crop} does not fit in the {rgb.shape[1]}x{rgb.shape[0]} image"
            )
        rgb = rgb[y : y + h, x : x + w]
    if config.resize is not None and (rgb.shape[1], rgb.shape[0]) != config.resize:
        out = np.asarray(cv2.resize(rgb, config.resize, interpolation=cv2.INTER_AREA), dtype=np.uint8)
    else:
        out = np.array(rgb, dtype=np.uint8, order="C", copy=True)
    out.flags.writeable = False
    return out
