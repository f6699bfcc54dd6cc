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
    return decode_image_into(data, None)


def decode_image_into(data: bytes, out: np.ndarray | None, size: int | None = None) -> np.ndarray:
    """`decode_image` written into `out` (an HxWx3 uint8 C-contiguous array, e.g. one row of a batch) when given,
    resized to size x size first (area interpolation) when `size` is set and differs; returns the pixels.
    Decoded straight to RGB where OpenCV can (5.x), else its BGR frame's channels swapped: the same bytes."""
    cv2 = _cv2()
    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)
    buf = np.frombuffer(data, dtype=np.uint8)
    pixels = cv2.imdecode(buf, cv2.IMREAD_COLOR if rgb_flag is None else rgb_flag)
    if pixels is None:
        raise ImageCodecError(f"cannot decode {len(data)} bytes as an image")
    if size is not None and pixels.shape[:2] != (size, size):
        pixels = cv2.resize(pixels, (size, size), interpolation=cv2.INTER_AREA)
    if out is not None and (out.shape != pixels.shape or out.dtype != np.uint8 or not out.flags.c_contiguous):
        raise ImageCodecError(
            f"a {pixels.shape[1]}x{pixels.shape[0]} image does not fit a frame of shape {out.shape} ({out.dtype}"
            f"{'' if out.flags.c_contiguous else ', not contiguous'})"
        )
    if rgb_flag is None:
        rgb: np.ndarray = cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB, dst=out)
        return rgb
    if out is None:
        return np.ascontiguousarray(pixels)
    out[...] = pixels
    return out
