"""`SourceCamera`: a camera around any `FrameSource` (a simulator's renderer, a test pattern)."""

from __future__ import annotations

import time

from user.cameras.camera import Camera
from user.cameras.config import CameraConfig
from user.cameras.frame import FrameSource, Grab, OpenableSource
from user.cameras.latest import Clock, WallClock


class SourceCamera(Camera):
    """Frames from `source`, captured in the camera's own thread.

    `pace=True` (the default) grabs at most `config.rate_hz` times a second, for sources that return at
    once with their current image; pass `pace=False` when `grab` itself waits for the next new frame.
    A source with `open()`/`close()` (`OpenableSource`) is opened and closed in the capture thread.
    """

    def __init__(
        self,
        config: CameraConfig,
        source: FrameSource,
        *,
        pace: bool = True,
        clock: Clock = time.monotonic,
        wall_clock: WallClock = time.time_ns,
    ) -> None:
        super().__init__(config, clock, wall_clock)
        self.source = source
        self.paced = pace

    def describe_device(self) -> str:
        return f"frame source {type(self.source).__name__}"

    def _open_device(self) -> None:
        if isinstance(self.source, OpenableSource):
            self.source.open()

    def _grab(self, timeout_s: float) -> Grab | None:
        return self.source.grab(timeout_s)

    def _close_device(self) -> None:
        if isinstance(self.source, OpenableSource):
            self.source.close()
