"""`CameraRig`: the real cameras of one robot, opened and closed with it, handing the newest frames over."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from user.robot_loop.observe import CameraFrames

if TYPE_CHECKING:  # user.cameras imports OpenCV: loaded only when a real driver has cameras
    from user.cameras.camera import Camera
    from user.cameras.frame import Frame
    from user.cameras.latest import CameraHealth

_STALE_WARN_PERIOD_S = 5.0
_log = logging.getLogger(__name__)


class CameraRig:
    """The real cameras of one robot; `frames` hands the newest frame of each to the observer, never waiting.

    A camera with no frame yet is left out of the observation; a stale one (older than its `max_age_s`) is still
    handed out (its stamp tells its age). While a `required` camera has no fresh frame (stale, dead, unplugged
    and being reopened), `frames` carries a `fault`, and the control loop holds the robot: one line is logged
    when that starts and one when it ends. A camera that is not required only gets a warning every few seconds.
    """

    def __init__(self, cameras: Sequence[Camera]) -> None:
        self.cameras = tuple(cameras)
        self._warned: dict[str, float] = {}  # camera -> when its last warning was logged (monotonic s)
        self._holding: frozenset[str] = frozenset()  # required cameras without a fresh frame at the last call

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    def open(self) -> None:
        """Open every camera and wait (at most each one's `open_timeout_s`) for its first frame."""
        try:
            for camera in self.cameras:
                camera.open()
            for camera in self.cameras:
                self._await_first_frame(camera)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        from user.cameras.errors import CameraError

        for camera in self.cameras:
            try:
                camera.close()
            except CameraError as exc:
                _log.warning("%s (closing the other cameras anyway)", exc)

    def health(self) -> dict[str, CameraHealth]:
        """Each camera's counters and whether it is dead, by name (for the robot's `/diagnostics`)."""
        return {camera.name: camera.health() for camera in self.cameras}

    def frames(self) -> CameraFrames:
        """The newest frame of each camera, with a fault naming the required cameras that have no fresh one."""
        out = CameraFrames()
        faults: dict[str, str] = {}
        for camera in self.cameras:
            frame = camera.poll()
            if frame is not None:
                out[camera.name] = (frame.rgb, frame.stamp_ns)
            problem = self._problem(camera, frame)
            if problem and camera.config.required:
                faults[camera.name] = f"camera {camera.name!r}: {problem}"
            elif problem:
                self._warn(camera.name, problem)
        out.fault = "; ".join(faults.values())
        self._report(frozenset(faults), out.fault)
        return out

    @staticmethod
    def _problem(camera: Camera, frame: Frame | None) -> str:
        """Why `frame` must not be acted on ("" when it is fresh)."""
        if frame is not None and not frame.stale:
            return ""
        dead = camera.health().dead_reason
        what = "no frame yet" if frame is None else f"newest frame is {frame.age_s:.2f} s old"
        what += f" (limit {camera.config.max_age_s:.2f} s)"
        return f"{what}; dead: {dead}" if dead else what

    def _report(self, holding: frozenset[str], fault: str) -> None:
        """One line when required cameras start (or change) holding the robot, one when they all deliver again."""
        was, self._holding = self._holding, holding
        if holding and holding != was:
            _log.error("robot holds (sends no action) until its required cameras deliver again: %s", fault)
        elif was and not holding:
            _log.warning("required cameras deliver fresh frames again (%s); the robot moves on", ", ".join(sorted(was)))

    def _await_first_frame(self, camera: Camera) -> None:
        from user.cameras.errors import CameraOpenError

        timeout_s = camera.config.open_timeout_s
        deadline = time.monotonic() + timeout_s
        waiter = threading.Event()  # never set: a deadline-bounded pause between polls
        while camera.poll(float("inf")) is None:
            if time.monotonic() >= deadline:
                raise CameraOpenError(camera.name, f"opened, but delivered no frame within {timeout_s:.1f} s")
            waiter.wait(min(camera.config.period_s, 0.05))

    def _warn(self, camera: str, what: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(camera, -_STALE_WARN_PERIOD_S) >= _STALE_WARN_PERIOD_S:
            self._warned[camera] = now
            _log.warning("camera %r: %s; not required, so observations carry what there is", camera, what)
