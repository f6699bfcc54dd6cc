"""Frame sources and a clock for camera tests: real threads, controllable timing, no mocks."""

from __future__ import annotations

import threading

import numpy as np

from user.cameras import RGB, CameraConfig, EndOfStreamError


def solid(value: int, width: int = 16, height: int = 12) -> RGB:
    """A frame whose every pixel is (value, value // 2, 255 - value): the frame's identity is its colour."""
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[:] = (value, value // 2, 255 - value)
    return frame


def config(name: str = "cam", **overrides: object) -> CameraConfig:
    values: dict[str, object] = {"name": name, "driver": "source", "rate_hz": 50.0}
    values.update(overrides)
    return CameraConfig(**values)  # type: ignore[arg-type]


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class CountingSource:
    """Frames 1, 2, ... `limit` (colour = number), each stamped `number * 1000` ns; after `limit`, no frames
    (grab waits its timeout and returns None), or the end of the stream when `end` is set."""

    def __init__(self, limit: int | None = None, end: bool = False) -> None:
        self.limit = limit
        self.end = end
        self.produced = 0
        self._idle = threading.Event()

    def grab(self, timeout_s: float) -> tuple[RGB, int | None] | None:
        if self.limit is not None and self.produced >= self.limit:
            if self.end:
                raise EndOfStreamError("cam", "test stream is over")
            self._idle.wait(timeout_s)  # nothing new: wait as a device would, then report no frame
            return None
        self.produced += 1
        return solid(self.produced % 256), self.produced * 1000


class SleepySource:
    """First grab returns a frame at once; every later grab sleeps up to `sleep_s` (unless woken) before
    returning the next frame: a device that stalls inside its read call, ignoring the timeout."""

    def __init__(self, sleep_s: float = 5.0) -> None:
        self.sleep_s = sleep_s
        self.calls = 0
        self.sleeping = threading.Event()
        self._wake = threading.Event()

    def grab(self, timeout_s: float) -> tuple[RGB, int | None] | None:
        self.calls += 1
        if self.calls > 1:
            self.sleeping.set()
            self._wake.wait(self.sleep_s)
            self.sleeping.clear()
        return solid(self.calls), None

    def wake(self) -> None:
        self._wake.set()


class FlakySource:
    """Raises on every second grab (a device with transient read errors)."""

    def __init__(self) -> None:
        self.calls = 0

    def grab(self, timeout_s: float) -> tuple[RGB, int | None] | None:
        self.calls += 1
        if self.calls % 2 == 0:
            raise OSError("USB transfer failed")
        return solid(self.calls), None


class SlowOpenSource:
    """An openable source whose open takes up to `open_s` (until released); records open and close."""

    def __init__(self, open_s: float = 5.0) -> None:
        self.open_s = open_s
        self.release = threading.Event()
        self.opened = threading.Event()
        self.closed = threading.Event()

    def open(self) -> None:
        self.release.wait(self.open_s)
        self.opened.set()

    def close(self) -> None:
        self.closed.set()

    def grab(self, timeout_s: float) -> tuple[RGB, int | None] | None:
        return solid(1), None
