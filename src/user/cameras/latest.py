"""`LatestFrame`: the newest frame of one camera, its counters and its health. Thread-safe.

The capture thread `put`s frames; the control loop asks `latest`/`poll`, which only swap a reference
under a lock and so return at once, whatever the device is doing. Ages and the dead check use an
injectable monotonic clock, so tests control time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from user.cameras.errors import CameraDeadError, NoFrameError, StaleFrameError
from user.cameras.frame import RGB, Frame

_log = logging.getLogger(__name__)
LOG_INTERVAL_S = 5.0  # repeated capture errors and drops are logged at most this often per camera
_RATE_SMOOTHING = 0.1  # weight of the newest interval in the measured frame rate
Clock = Callable[[], float]  # monotonic seconds: frame ages and the dead check
WallClock = Callable[[], int]  # nanoseconds since the epoch: frame arrival times


@dataclass(frozen=True)
class CameraHealth:
    """A snapshot of one camera's counters, for monitors and hardware announcements."""

    camera: str
    frames: int  # frames captured since open
    dropped: int  # frames lost by the device or transport (frame-counter gaps, messages replaced unread)
    overwritten: int  # frames replaced before anyone read them (normal when the camera outpaces the loop)
    errors: int  # failed grabs and malformed frames
    last_error: str  # the latest error message, "" if none
    age_s: float | None  # age of the newest frame, None before the first
    measured_rate_hz: float  # smoothed arrival rate, 0 before two frames
    dead: bool  # no frame for `dead_after_periods` periods, or the stream ended
    dead_reason: str  # why it is considered dead, "" when alive


class _Throttle:
    """Says yes at most once per interval (for log messages that could repeat every frame)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last: float | None = None

    def ready(self, now: float) -> bool:
        if self._last is not None and now - self._last < self.interval_s:
            return False
        self._last = now
        return True


class LatestFrame:
    """The newest frame of camera `camera`, whose frames should come every `period_s`."""

    def __init__(
        self,
        camera: str,
        period_s: float,
        dead_after_periods: int = 10,
        clock: Clock = time.monotonic,
        wall_clock: WallClock = time.time_ns,
    ) -> None:
        if not period_s > 0.0:
            raise ValueError(f"camera {camera!r}: frame period must be positive, got {period_s!r}")
        self.camera = camera
        self.period_s = period_s
        self.dead_after_s = dead_after_periods * period_s
        self._clock = clock
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._error_log = _Throttle(LOG_INTERVAL_S)
        self._drop_log = _Throttle(LOG_INTERVAL_S)
        self.reset()

    def reset(self) -> None:
        """Forget frames and counters (on open)."""
        with self._lock:
            self._frame: Frame | None = None
            self._read_seq = 0
            self._started_at: float | None = None
            self._frames = self._dropped = self._overwritten = self._errors = 0
            self._last_error = ""
            self._rate_hz = 0.0
            self._ended = ""
            self._dead_reason = ""

    def mark_started(self) -> None:
        """The device is open: from now on, a missing frame counts towards the dead check."""
        with self._lock:
            self._started_at = self._clock()

    def mark_ended(self, reason: str) -> None:
        """The stream ended for good (e.g. end of a video file): the camera is dead from now on."""
        with self._lock:
            self._ended = reason
        self.check_dead()

    def put(self, rgb: RGB, hardware_stamp_ns: int | None = None) -> Frame:
        """Keep `rgb` (already private and read-only) as the newest frame; the previous one is let go."""
        now = self._clock()
        with self._lock:
            previous = self._frame
            self._frames += 1
            frame = Frame(self.camera, rgb, self._frames, self._wall_clock(), now, hardware_stamp_ns)
            if previous is not None:
                if previous.seq > self._read_seq:
                    self._overwritten += 1
                interval = now - previous.arrival_s
                if interval > 0.0:
                    rate = 1.0 / interval
                    self._rate_hz = (
                        rate if self._rate_hz == 0.0 else self._rate_hz + _RATE_SMOOTHING * (rate - self._rate_hz)
                    )
            self._frame = frame
        self.check_dead(now)
        return frame

    def last_arrival(self) -> float | None:
        """When the newest frame arrived (the camera's monotonic clock), None before the first."""
        with self._lock:
            return None if self._frame is None else self._frame.arrival_s

    def count_dropped(self, n: int = 1) -> None:
        """`n` frames were lost before reaching the camera (device counter gap, transport overwrite)."""
        now = self._clock()
        with self._lock:
            self._dropped += n
            total = self._dropped
        if self._drop_log.ready(now):
            _log.warning("camera %r: %d frame(s) lost by the device or transport (%d in total)", self.camera, n, total)

    def count_error(self, error: BaseException) -> None:
        """A grab failed or a frame was malformed; the capture thread carries on."""
        now = self._clock()
        with self._lock:
            self._errors += 1
            self._last_error = str(error) or type(error).__name__
            total = self._errors
        if self._error_log.ready(now):
            _log.warning("camera %r: capture error (%d so far): %s", self.camera, total, self._last_error)

    def latest(self, max_age_s: float) -> Frame:
        """The newest frame, if at most `max_age_s` old; else `NoFrameError`, `StaleFrameError` or
        `CameraDeadError`. Never waits for the capture thread."""
        frame = self.poll(max_age_s)
        if frame is not None and not frame.stale:
            return frame
        dead = self.dead_reason()
        if frame is None:
            if dead:
                raise CameraDeadError(self.camera, dead, None, max_age_s)
            raise NoFrameError(self.camera, "no frame received yet", None, max_age_s)
        message = f"newest frame is {frame.age_s * 1000:.0f} ms old (limit {max_age_s * 1000:.0f} ms)"
        if dead:
            raise CameraDeadError(self.camera, f"{message}; {dead}", frame.age_s, max_age_s)
        raise StaleFrameError(self.camera, message, frame.age_s, max_age_s)

    def poll(self, max_age_s: float) -> Frame | None:
        """The newest frame with its `age_s` and `stale` flag set, or None before the first. Never raises
        for staleness, never waits."""
        now = self._clock()
        with self._lock:
            frame = self._frame
            if frame is None:
                return None
            self._read_seq = max(self._read_seq, frame.seq)
        age = max(0.0, now - frame.arrival_s)
        return dataclasses.replace(frame, age_s=age, stale=age > max_age_s)

    def check_dead(self, now: float | None = None) -> bool:
        """Whether the camera is dead now; logs (with the camera name) when that changes."""
        return bool(self.dead_reason(now))

    def dead_reason(self, now: float | None = None) -> str:
        """Why the camera is dead now ("" when alive); logs (with the camera name) when that changes."""
        t = self._clock() if now is None else now
        with self._lock:
            was = self._dead_reason
            reason = self._dead_reason_at(t)
            self._dead_reason = reason
            # Logged under the lock so that whoever sees the new state (health(), another thread) also
            # finds its log line already written.
            if reason and not was:
                _log.error("camera %r: %s", self.camera, reason)
            elif was and not reason:
                _log.warning("camera %r: frames are arriving again", self.camera)
        return reason

    def _dead_reason_at(self, now: float) -> str:
        if self._ended:
            return f"stream ended ({self._ended})"
        if self._started_at is None:
            return ""
        last = self._frame.arrival_s if self._frame is not None else self._started_at
        silent = now - last
        if silent <= self.dead_after_s:
            return ""
        what = "no frame" if self._frame is None else "no new frame"
        periods = silent / self.period_s
        return f"{what} for {silent:.2f} s ({periods:.0f} frame periods); device dead or disconnected"

    def health(self) -> CameraHealth:
        now = self._clock()
        self.check_dead(now)
        with self._lock:
            frame = self._frame
            return CameraHealth(
                camera=self.camera,
                frames=self._frames,
                dropped=self._dropped,
                overwritten=self._overwritten,
                errors=self._errors,
                last_error=self._last_error,
                age_s=None if frame is None else max(0.0, now - frame.arrival_s),
                measured_rate_hz=self._rate_hz,
                dead=bool(self._dead_reason),
                dead_reason=self._dead_reason,
            )
