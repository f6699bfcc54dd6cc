"""One scheduler thread per bus that fires periodic timers without drift."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

_log = logging.getLogger(__name__)


class Timer:
    """A periodic timer owned by a `TimerScheduler`. `close()` stops it."""

    def __init__(self, scheduler: TimerScheduler, period_s: float, callback: Callable[[], None]) -> None:
        self.period_s = period_s
        self.callback = callback
        self.cancelled = False
        self._scheduler = scheduler

    def close(self) -> None:
        self.cancelled = True
        self._scheduler.wake()


class TimerScheduler:
    """Runs timers' callbacks on one thread, each under `lock` (the bus's callback lock)."""

    def __init__(self, name: str, lock: threading.RLock) -> None:
        self._lock = lock
        self._heap: list[tuple[float, int, Timer]] = []
        self._counter = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"{name}-timers", daemon=True)
        self._thread.start()

    def add(self, period_s: float, callback: Callable[[], None]) -> Timer:
        if period_s <= 0:
            raise ValueError(f"timer period must be positive, got {period_s}")
        timer = Timer(self, period_s, callback)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + period_s, next(self._counter), timer))
            self._cond.notify()
        return timer

    def wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def stop(self, timeout_s: float = 2.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def _next_due(self) -> Timer | None:
        """Wait until the earliest timer is due; None when stopped."""
        with self._cond:
            while not self._stopped:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait(1.0)
                    continue
                due, _, timer = self._heap[0]
                delay = due - time.monotonic()
                if delay > 0:
                    self._cond.wait(min(delay, 1.0))
                    continue
                heapq.heappop(self._heap)
                now = time.monotonic()
                nxt = due + timer.period_s
                if nxt <= now:  # fell behind: skip missed periods instead of bursting
                    nxt = now + timer.period_s - ((now - due) % timer.period_s)
                heapq.heappush(self._heap, (nxt, next(self._counter), timer))
                return timer
            return None

    def _run(self) -> None:
        while (timer := self._next_due()) is not None:
            if timer.cancelled:
                continue
            with self._lock:
                try:
                    timer.callback()
                except Exception:
                    _log.exception("timer callback %s raised", getattr(timer.callback, "__qualname__", "?"))
