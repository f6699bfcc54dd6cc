"""`Camera`: the interface every camera driver implements, with the capture thread they all share.

A driver supplies three hooks that run in the camera's own daemon thread: `_open_device`, `_grab` and
`_close_device`. The thread opens the device (bounded by `open_timeout_s`), grabs frames, crops/resizes
them, and keeps only the newest in a `LatestFrame`. The control loop calls `latest`/`poll`, which
return at once whatever the device is doing. `close` stops the thread and waits for it, with a deadline.

A driver whose device can vanish (`reopens = True`: USB cameras, streams, a RealSense) is closed and opened
again when it stops delivering: after `dead_after_periods` periods without a frame, or at once when its grab
raises `CameraLostError`. Reopen attempts pause 0.5 s, 1 s, 2 s ... (at most 5 s) until `reopen_timeout_s`;
then the stream is marked ended, so the camera reports dead for good (`CameraDeadError`) and the robot holds.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from types import TracebackType

from user.cameras.config import CameraConfig
from user.cameras.errors import (
    CameraError,
    CameraLostError,
    CameraNotOpenError,
    CameraOpenError,
    EndOfStreamError,
)
from user.cameras.frame import Frame, Grab
from user.cameras.latest import CameraHealth, Clock, LatestFrame, WallClock
from user.cameras.processing import prepare

_log = logging.getLogger(__name__)
MAX_GRAB_WAIT_S = 0.25  # a grab waits at most this long, so the thread notices close() and a dead device
REOPEN_FIRST_PAUSE_S = 0.5  # pause before the first attempt to reopen a lost device; doubled after each failure
REOPEN_MAX_PAUSE_S = 5.0  # longest pause between two attempts to reopen a lost device


class _Run:
    """The events of one capture thread: a thread left behind by a timed-out open keeps its own."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.error: BaseException | None = None


class Camera(ABC):
    """One camera: open it, read its newest frame without waiting, close it."""

    paced = False  # True: grab at most `rate_hz` times a second (sources that return at once, like files)
    reopens = False  # True: a device that stops delivering is closed and opened again (see the module docstring)

    def __init__(
        self, config: CameraConfig, clock: Clock = time.monotonic, wall_clock: WallClock = time.time_ns
    ) -> None:
        self.config = config
        self._frames = LatestFrame(config.name, config.period_s, config.dead_after_periods, clock, wall_clock)
        self._clock = clock
        self._opened_at = clock()  # when the device was last (re)opened: silence is counted from then at most
        self._thread: threading.Thread | None = None
        self._lingering: threading.Thread | None = None  # a capture thread that missed its deadline
        self._run_state = _Run()

    # ----------------------------------------------------------------- what drivers implement

    @abstractmethod
    def describe_device(self) -> str:
        """Where the frames come from, for messages: "/dev/video0", "RealSense 123456", "topic /x"."""

    @abstractmethod
    def _open_device(self) -> None:
        """Open the device (capture thread). Raise `CameraOpenError`/`CameraUnavailableError` on failure."""

    @abstractmethod
    def _grab(self, timeout_s: float) -> Grab | None:
        """The next frame, waiting at most about `timeout_s`; None when none came (capture thread)."""

    @abstractmethod
    def _close_device(self) -> None:
        """Release the device (capture thread, after the last grab)."""

    # ----------------------------------------------------------------- the public interface

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_open(self) -> bool:
        return self._thread is not None

    def open(self) -> None:
        """Open the device and start capturing; returns once it is open. Raises `CameraOpenError` (also
        when it does not open within `open_timeout_s`) or `CameraUnavailableError`."""
        if self._thread is not None:
            return
        if self._lingering is not None and self._lingering.is_alive():
            raise CameraOpenError(
                self.name, f"the previous capture thread is still stuck in {self.describe_device()}; try again later"
            )
        self._lingering = None
        self._frames.reset()
        run = self._run_state = _Run()
        thread = threading.Thread(target=self._run, args=(run,), name=f"camera-{self.name}", daemon=True)
        thread.start()
        if not run.ready.wait(self.config.open_timeout_s):
            run.stop.set()  # the thread releases the device if the open ever returns
            self._lingering = thread
            raise CameraOpenError(
                self.name, f"{self.describe_device()} did not open within {self.config.open_timeout_s} s"
            )
        error = run.error
        if error is not None:
            thread.join(self.config.close_timeout_s)
            if isinstance(error, CameraError):
                raise error
            raise CameraOpenError(self.name, f"cannot open {self.describe_device()}: {error}") from error
        self._thread = thread
        _log.info("camera %r: opened %s", self.name, self.describe_device())

    def close(self) -> None:
        """Stop capturing and release the device; waits at most `close_timeout_s` for the capture thread."""
        thread, self._thread = self._thread, None
        self._run_state.stop.set()
        if thread is None:
            return
        thread.join(self.config.close_timeout_s)
        if thread.is_alive():
            self._lingering = thread
            _log.warning(
                "camera %r: capture thread did not stop within %.1f s (blocked in %s); it releases the device "
                "when that call returns",
                self.name,
                self.config.close_timeout_s,
                self.describe_device(),
            )
        else:
            _log.info("camera %r: closed", self.name)

    def latest(self, max_age_s: float | None = None) -> Frame:
        """The newest frame if at most `max_age_s` old (default: the config's). Never waits. Raises
        `NoFrameError`, `StaleFrameError` or `CameraDeadError` (all `StaleFrameError`s), or
        `CameraNotOpenError`."""
        self._check_open()
        return self._frames.latest(self.config.max_age_s if max_age_s is None else max_age_s)

    def poll(self, max_age_s: float | None = None) -> Frame | None:
        """The newest frame with `stale` set when older than `max_age_s`, or None before the first frame.
        Never waits, never raises for staleness: for loops that hold or mark the observation themselves."""
        self._check_open()
        return self._frames.poll(self.config.max_age_s if max_age_s is None else max_age_s)

    def health(self) -> CameraHealth:
        return self._frames.health()

    def __enter__(self) -> Camera:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.describe_device()})"

    # ----------------------------------------------------------------- the capture thread

    def _check_open(self) -> None:
        if self._thread is None:
            raise CameraNotOpenError(self.name, "not open; call open() first")

    def _run(self, run: _Run) -> None:
        try:
            self._open_device()
        except BaseException as exc:  # reported to open(), which raises it in the caller's thread
            run.error = exc
            run.ready.set()
            return
        if run.stop.is_set():  # open() gave up waiting: release the device at once
            self._close_quietly()
            return
        self._opened_at = self._clock()
        self._frames.mark_started()
        run.ready.set()
        try:
            self._loop(run.stop)
        except Exception as exc:  # a bug, not a device error: report it and end capture
            _log.exception("camera %r: capture thread failed; no new frames will come", self.name)
            self._frames.mark_ended(f"capture thread failed: {exc}")
        finally:
            self._close_quietly()

    def _close_quietly(self) -> None:
        try:
            self._close_device()
        except Exception as exc:
            _log.warning("camera %r: error while releasing %s: %s", self.name, self.describe_device(), exc)

    def _loop(self, stop: threading.Event) -> None:
        period = self.config.period_s
        wait = min(period, MAX_GRAB_WAIT_S)
        next_due = time.monotonic()
        while not stop.is_set():
            if self.paced:
                next_due = max(next_due + period, time.monotonic() - period)
            try:
                if not self._step(stop, wait):
                    return
            except CameraLostError as exc:
                self._frames.count_error(exc)
                if not self._reopen(stop, str(exc)):
                    return
                continue
            silent = self._silent_s()
            if self.reopens and silent > self._frames.dead_after_s:
                if not self._reopen(stop, f"no frame for {silent:.1f} s"):
                    return
                continue
            if self.paced:
                stop.wait(max(0.0, next_due - time.monotonic()))

    def _step(self, stop: threading.Event, wait_s: float) -> bool:
        """Grab and keep one frame; False when the stream has ended. `CameraLostError` passes through."""
        try:
            grabbed = self._grab(wait_s)
        except EndOfStreamError as exc:
            _log.warning("%s", exc)
            self._frames.mark_ended(str(exc))
            return False
        except CameraLostError:
            raise
        except Exception as exc:  # device errors: count, log (throttled), retry one period later
            self._frames.count_error(exc)
            stop.wait(self.config.period_s)
            return True
        if grabbed is None:
            self._frames.check_dead()
            return True
        try:
            rgb = prepare(self.config, grabbed[0])
        except CameraError as exc:
            self._frames.count_error(exc)
            return True
        self._frames.put(rgb, grabbed[1])
        return True

    def _silent_s(self) -> float:
        """Seconds without a frame, counted from the last (re)open at most."""
        last = self._frames.last_arrival()
        since = self._opened_at if last is None else max(last, self._opened_at)
        return self._clock() - since

    def _reopen(self, stop: threading.Event, why: str) -> bool:
        """Close the lost device and open it again, pausing longer after each failure, for at most
        `reopen_timeout_s`. False (capture ends) when it did not come back or `close()` was called."""
        device, timeout = self.describe_device(), self.config.reopen_timeout_s
        self._close_quietly()
        if timeout <= 0.0:
            self._frames.mark_ended(f"{device} lost ({why}); not reopened (reopen_timeout_s is 0)")
            return False
        _log.warning("camera %r: %s lost (%s); reopening it for up to %.0f s", self.name, device, why, timeout)
        deadline = time.monotonic() + timeout
        pause, attempts, last_error = REOPEN_FIRST_PAUSE_S, 0, why
        while not stop.wait(min(pause, max(0.0, deadline - time.monotonic()))):
            attempts += 1
            try:
                self._open_device()
            except Exception as exc:  # still away (or busy): try again after a longer pause
                last_error = str(exc) or type(exc).__name__
                if time.monotonic() >= deadline:
                    break
                pause = min(2.0 * pause, REOPEN_MAX_PAUSE_S)
                continue
            self._opened_at = self._clock()
            _log.warning("camera %r: %s reopened (attempt %d); waiting for its frames", self.name, device, attempts)
            return True
        if not stop.is_set():
            self._frames.mark_ended(
                f"{device} lost and not back within {timeout:.0f} s ({attempts} attempts; last: {last_error})"
            )
        return False
