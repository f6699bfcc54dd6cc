"""Typed camera errors. Every message starts with the camera's name, so an operator knows which one."""

from __future__ import annotations


class CameraError(RuntimeError):
    """Base of all camera errors; `camera` is the name of the camera concerned."""

    def __init__(self, camera: str, message: str) -> None:
        super().__init__(f"camera {camera!r}: {message}")
        self.camera = camera


class CameraUnavailableError(CameraError):
    """The driver cannot run here: its Python package is missing or the platform lacks support."""


class CameraOpenError(CameraError):
    """The device could not be opened (not found, busy, wrong settings, or it did not answer in time)."""


class CameraNotOpenError(CameraError):
    """A frame was asked for before `open()` or after `close()`."""


class CameraLostError(CameraError):
    """The device vanished while streaming (unplugged, reset, its driver gave up); raised by drivers inside the
    capture thread, which then reopens it (see `CameraConfig.reopen_timeout_s`)."""


class EndOfStreamError(CameraError):
    """The source ended for good (a video file reached its end); raised by drivers inside the capture thread."""


class FrameFormatError(CameraError):
    """A frame had the wrong shape or type, or could not be cropped or converted."""


class StaleFrameError(CameraError):
    """The newest frame is older than the caller allows (`age_s` is None when there is no frame at all)."""

    def __init__(self, camera: str, message: str, age_s: float | None, max_age_s: float) -> None:
        super().__init__(camera, message)
        self.age_s = age_s
        self.max_age_s = max_age_s


class NoFrameError(StaleFrameError):
    """No frame has arrived since the camera was opened."""


class CameraDeadError(StaleFrameError):
    """The camera delivered no frame for too many periods (or its stream ended): device dead or disconnected."""
