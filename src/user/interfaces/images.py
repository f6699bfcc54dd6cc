"""JPEG/PNG encoding of camera frames (OpenCV, imported on first use)."""

from __future__ import annotations

from typing import Any

import numpy as np


class ImageCodecError(ValueError):
    """A frame could not be encoded or decoded."""


def _cv2() -> Any:
    import cv2

    return cv2


def encode_jpeg(rgb: np.ndarray, quality: int = 90) -> bytes:
    """JPEG bytes of an HxWx3 uint8 RGB frame."""
    if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ImageCodecError(f"expected an HxWx3 uint8 RGB frame, got {rgb.dtype} {rgb.shape}")
    cv2 = _cv2()
    ok, buf = cv2.imencode(".jpg", rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ImageCodecError("OpenCV failed to encode the frame as JPEG")
    return bytes(buf.tobytes())


def decode_image(data: bytes) -> np.ndarray:
    """HxWx3 uint8 RGB pixels of a JPEG or PNG."""
    cv2 = _cv2()
    bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ImageCodecError(f"cannot decode {len(data)} bytes as an image")
    return np.ascontiguousarray(bgr[:, :, ::-1])
