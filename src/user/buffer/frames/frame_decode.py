"""Decoders of compressed camera frames into rows of a uint8 batch: OpenCV on a pool of threads (it releases the
GIL, so the threads run on all cores), or nvJPEG through torchvision on a GPU when one is there.

    decoder = make_decoder(FramesConfig(device="auto"))
    decoder.decode_into(frames, out)          # out[k] <- pixels of frames[k], (B, H, W, 3) uint8
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

import numpy as np

from user.buffer.config import FramesConfig
from user.buffer.errors import BufferError
from user.interfaces.images import ImageCodecError, decode_image_into

_log = logging.getLogger("user.buffer.frames")

DECODE_TIMEOUT_S = 60.0  # a batch's frames decode within this, or the batch fails (a stuck decoder is not waited on)
JPEG_MAGIC = b"\xff\xd8"


class DecodeTimeoutError(BufferError):
    """Frames did not decode within the deadline."""


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Decoding:
    """Frames being decoded into their rows on other threads; `wait` returns once all are written."""

    def __init__(self, futures: Sequence[Future[None]] = ()) -> None:
        self._futures = list(futures)

    def wait(self) -> None:
        """Block until done (the first decoding error raised here); `DecodeTimeoutError` at the deadline."""
        if not self._futures:
            return
        _, pending = wait(self._futures, timeout=DECODE_TIMEOUT_S)
        if pending:
            for future in pending:
                future.cancel()
            raise DecodeTimeoutError(f"frames did not decode within {DECODE_TIMEOUT_S:.0f} s")
        for future in self._futures:
            future.result()


class FrameDecoder(Protocol):
    """Writes decoded frames into rows of a batch."""

    name: str  # what decodes: "cpu (N threads)" or "cuda (nvJPEG)"

    def decode_one(self, data: bytes) -> np.ndarray:
        """The (H, W, 3) uint8 pixels of one frame (the shape of a batch's rows is learnt from it)."""
        ...

    def decode_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> None:
        """out[k] <- the pixels of frames[k] (`out`: a (B, H, W, 3) uint8 array or a sequence of (H, W, 3) rows);
        `ImageCodecError` for a frame that does not decode or does not fit."""
        ...

    def start_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> Decoding:
        """`decode_into` begun, not waited for: the caller does other work, then `wait`s."""
        ...

    def close(self) -> None: ...


class CpuDecoder:
    """OpenCV on `workers` threads; each thread decodes a contiguous share of the rows straight into `out`."""

    def __init__(self, workers: int, size: int | None) -> None:
        self.workers = max(1, workers)
        self.size = size
        self.name = f"cpu ({self.workers} threads)"
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="buffer-decode")

    def decode_one(self, data: bytes) -> np.ndarray:
        return decode_image_into(data, None, self.size)

    def _rows(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray], lo: int, hi: int) -> None:
        for k in range(lo, hi):
            decode_image_into(frames[k], out[k], self.size)

    def decode_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> None:
        self.start_into(frames, out).wait()

    def start_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> Decoding:
        n = len(frames)
        if n == 0:
            return Decoding()
        bounds = np.linspace(0, n, min(self.workers, n) + 1).astype(int)
        return Decoding(
            [self._pool.submit(self._rows, frames, out, int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class CudaDecoder:
    """nvJPEG on the GPU (torchvision's `decode_jpeg` on a list of frames), pixels copied back into `out`; frames
    that are not JPEG (PNG) go to the CPU decoder."""

    def __init__(self, device: str, size: int | None, fallback: CpuDecoder) -> None:
        import torch
        from torchvision.io import decode_jpeg

        self._torch: Any = torch
        self._decode_jpeg: Any = decode_jpeg
        self.device = device
        self.size = size
        self.fallback = fallback
        self.name = f"{device} (nvJPEG)"

    def decode_one(self, data: bytes) -> np.ndarray:
        return self.fallback.decode_one(data)

    def start_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> Decoding:
        self.decode_into(frames, out)  # one batched call on the GPU: done when it returns
        return Decoding()

    def decode_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> None:
        jpeg = [k for k, f in enumerate(frames) if f[:2] == JPEG_MAGIC]
        other = [k for k, f in enumerate(frames) if f[:2] != JPEG_MAGIC]
        for k in other:
            decode_image_into(frames[k], out[k], self.size)
        if not jpeg:
            return
        torch = self._torch
        tensors = [torch.frombuffer(bytearray(frames[k]), dtype=torch.uint8) for k in jpeg]
        try:
            decoded = self._decode_jpeg(tensors, device=self.device)
        except RuntimeError as exc:
            raise ImageCodecError(f"nvJPEG could not decode a frame of this batch: {exc}") from exc
        pixels = torch.stack(decoded)  # (n, 3, H, W) on the device; frames of other sizes do not stack
        if self.size is not None and tuple(pixels.shape[-2:]) != (self.size, self.size):
            resized = torch.nn.functional.interpolate(pixels.float(), size=(self.size, self.size), mode="area")
            pixels = resized.round().clamp(0, 255).to(torch.uint8)
        host = pixels.permute(0, 2, 3, 1).contiguous().cpu().numpy()
        for k, pixels in zip(jpeg, host, strict=True):
            if pixels.shape != out[k].shape:
                raise ImageCodecError(f"a frame of shape {pixels.shape} does not fit a batch of {out[k].shape}")
            out[k][...] = pixels

    def close(self) -> None:
        self.fallback.close()


def cuda_available() -> bool:
    """Whether torch sees a CUDA device and torchvision can decode on it (neither is imported otherwise)."""
    try:
        import torch
        import torchvision.io  # noqa: F401 - only whether it imports
    except Exception:  # an absent or broken (CPU-only torch) torchvision alike
        return False
    return bool(torch.cuda.is_available())


def make_decoder(config: FramesConfig) -> FrameDecoder:
    """The decoder `config.device` asks for: cpu, cuda (an error without one) or auto (cuda when there)."""
    cpu = CpuDecoder(config.workers or usable_cores(), config.image_size)
    if config.device == "cpu":
        return cpu
    if cuda_available():
        return CudaDecoder("cuda", config.image_size, cpu)
    if config.device == "cuda":
        cpu.close()
        raise BufferError("frames.device is cuda, but no CUDA device with torchvision's nvJPEG decoder is here")
    _log.info("no CUDA device with torchvision: frames decode on the CPU (%s)", cpu.name)
    return cpu
