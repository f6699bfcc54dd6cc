"""Hold on stall: the control loop only applies actions that arrived recently.

The action subscriber `feed`s each action with its receive time; the control timer asks `latest(now)`
and holds the robot when it gets None. With `deadline_s` at most one control period, an arm holds
within two control periods of the last fresh action.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt


class ActionWatchdog:
    """The latest action, handed out only while it is younger than `deadline_s`. Thread-safe."""

    def __init__(self, deadline_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(deadline_s) and deadline_s > 0.0):
            raise ValueError(f"action deadline must be a positive number of seconds, got {deadline_s!r}")
        self.deadline_s = deadline_s
        self._clock = clock
        self._lock = threading.Lock()
        self._action: npt.NDArray[Any] | None = None
        self._received_at: float | None = None

    def feed(self, action: np.ndarray, received_at: float | None = None) -> None:
        """Record an action received at `received_at` (the watchdog's clock; default now).

        A time in the future is taken as now, so a wrong stamp cannot keep an action fresh; an action
        older than the one already held is ignored.
        """
        now = self._clock()
        stamp = now if received_at is None else min(received_at, now)
        with self._lock:
            if self._received_at is not None and stamp < self._received_at:
                return
            self._action = np.array(action, copy=True)
            self._received_at = stamp

    def latest(self, now: float | None = None) -> npt.NDArray[Any] | None:
        """The last action if it is at most `deadline_s` old at `now` (default: the clock), else None."""
        t = self._clock() if now is None else now
        with self._lock:
            if self._action is None or self._received_at is None or t - self._received_at > self.deadline_s:
                return None
            return np.array(self._action, copy=True)

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the last action was received, or None if none ever was."""
        t = self._clock() if now is None else now
        with self._lock:
            return None if self._received_at is None else max(0.0, t - self._received_at)

    def stale_reason(self, now: float | None = None) -> str:
        """Operator-readable reason to hold, e.g. "no fresh action for 250 ms"."""
        age = self.age(now)
        if age is None:
            return "no action received yet"
        return f"no fresh action for {age * 1000:.0f} ms (deadline {self.deadline_s * 1000:.0f} ms)"

    def clear(self) -> None:
        """Forget the last action (e.g. at an episode boundary): the robot holds until a new one arrives."""
        with self._lock:
            self._action = None
            self._received_at = None
