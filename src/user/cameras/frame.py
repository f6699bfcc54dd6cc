"""What a camera hands out (`Frame`) and what any image producer implements to become one (`FrameSource`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

RGB = npt.NDArray[np.uint8]  # an HxWx3 uint8 RGB image
Grab = tuple[RGB, int | None]  # (HxWx3 uint8 RGB, hardware capture stamp in ns or None)


@runtime_checkable
class FrameSource(Protocol):
    """Anything that produces images: a simulator's renderer, a test pattern, a device driver.

    `grab` is called over and over by one camera capture thread (never by the control loop). It should
    return the next new frame, waiting at most `timeout_s` for it, and None when none came in time. A
    source that always returns at once with its current image is fine too: wrap it in a paced
    `SourceCamera`. The returned array may be reused by the source afterwards (the camera copies it).

    The stamp is the capture time on the clock the robot's state uses (wall clock for real devices,
    simulation time for a simulator), or None when the source has no better time than arrival.
    Raising `EndOfStreamError` ends capture for good; any other exception is counted as a capture error
    and the camera tries again one period later.
    """

    def grab(self, timeout_s: float) -> Grab | None: ...


@runtime_checkable
class OpenableSource(FrameSource, Protocol):
    """A `FrameSource` with a lifecycle; `SourceCamera` opens and closes it in its capture thread."""

    def open(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Frame:
    """One camera image with its times. `rgb` is read-only and shared: copy it before changing it."""

    camera: str  # camera name
    rgb: RGB  # HxWx3 uint8 RGB, after the configured crop and resize
    seq: int  # 1, 2, 3, ... frames captured since the camera was opened
    arrival_ns: int  # wall clock (ns since the epoch) when the capture thread received it
    arrival_s: float  # the camera's monotonic clock, s, when it arrived (ages are measured on this clock)
    hardware_stamp_ns: int | None = None  # capture time reported by the device or source, where it has one
    age_s: float = 0.0  # how old it was when `latest`/`poll` handed it out
    stale: bool = False  # True when it was older than the caller's max age (only `poll` returns such frames)

    @property
    def stamp_ns(self) -> int:
        """Best capture time: the hardware stamp when the device gives one, else the arrival time."""
        return self.arrival_ns if self.hardware_stamp_ns is None else self.hardware_stamp_ns

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])
