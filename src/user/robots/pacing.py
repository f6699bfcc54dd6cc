"""Real-time pacing of a control loop (simulated or real arm), with its jitter measured.

`DeadlinePacer.wait()` sleeps until the next deadline on the monotonic clock (deadline k = start +
k * period, start = the last `restart()` or else the first `wait()`) and records how late it woke. When
the loop is already late it does not sleep and restarts the schedule from now (counted as an overrun),
so a slow period never causes a burst of fast ones.

To absorb scheduler wake-up latency on a busy machine it sleeps in one piece to `wake_early_s` before the
deadline and then in short naps of at most `fine_step_s` until the deadline (a little CPU for a much
tighter wake-up; set `wake_early_s=0` for a single sleep).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

HISTORY = 10_000  # lateness samples kept for the statistics
_ON_TIME_S = 1e-6  # closer than this to the deadline counts as there


@dataclass(frozen=True)
class PacingStats:
    """How well a loop kept its period (lateness = wake-up time - deadline)."""

    periods: int  # periods waited for since the last restart of the statistics
    overruns: int  # periods that were already over when `wait` was called
    p50_ms: float  # median lateness, ms
    p99_ms: float  # 99th percentile lateness, ms
    max_ms: float  # largest lateness, ms


class DeadlinePacer:
    """Sleeps to per-period deadlines; never sleeps longer than one period."""

    def __init__(
        self,
        period_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        *,
        wake_early_s: float = 0.002,
        fine_step_s: float = 0.0002,
    ) -> None:
        if not (np.isfinite(period_s) and period_s > 0.0):
            raise ValueError(f"period must be a positive number of seconds, got {period_s!r}")
        if not (0.0 <= wake_early_s < period_s and fine_step_s > 0.0):
            raise ValueError("wake_early_s must be in [0, period) and fine_step_s positive")
        self.period_s = period_s
        self.wake_early_s = wake_early_s
        self.fine_step_s = fine_step_s
        self._clock = clock
        self._sleep = sleep
        self._deadline: float | None = None
        self._late: deque[float] = deque(maxlen=HISTORY)
        self._overruns = 0

    def restart(self) -> None:
        """Start the schedule afresh (after a reset or a pause): the current period starts now."""
        self._deadline = self._clock() + self.period_s

    def wait(self) -> None:
        now = self._clock()
        if self._deadline is None:
            self._deadline = now + self.period_s
        delay = self._deadline - now
        if delay <= 0.0:
            self._overruns += 1
            self._late.append(-delay)
            self._deadline = now + self.period_s
            return
        deadline = self._deadline
        wake = now + min(delay, self.period_s)  # never wait longer than one period
        if wake - self.wake_early_s > now:
            self._sleep(wake - self.wake_early_s - now)
        for _ in range(int(self.wake_early_s / self.fine_step_s) + 2):  # bounded: the naps fill `wake_early_s`
            left = wake - self._clock()
            if left < _ON_TIME_S:
                break
            self._sleep(min(left, self.fine_step_s))
        self._late.append(max(0.0, self._clock() - deadline))
        self._deadline = deadline + self.period_s

    def stats(self) -> PacingStats:
        late = np.array(self._late, dtype=np.float64) * 1e3
        if late.size == 0:
            return PacingStats(0, self._overruns, 0.0, 0.0, 0.0)
        p50, p99 = np.percentile(late, [50, 99])
        return PacingStats(int(late.size), self._overruns, float(p50), float(p99), float(late.max()))

    def clear_stats(self) -> None:
        self._late.clear()
        self._overruns = 0
