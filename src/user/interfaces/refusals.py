"""`Refusals`: what a door refused, counted per cause and logged without flooding the log.

A forged or broken sender can repeat the same bad message at the bus's rate; the operator needs to know that
it happens, what is wrong and how often, not one line per message. Each cause (see
`user.interfaces.validate.InvalidMessageError.cause`) is logged the first time at once, then at most once every
`period_s`, with the number refused since its previous line. Every refusal is counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from user.interfaces.validate import InvalidMessageError

DEFAULT_PERIOD_S = 10.0


class Refusals:
    """Counts and logs the messages one node refused; thread-safe (bus callbacks of several threads)."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        period_s: float = DEFAULT_PERIOD_S,
        level: int = logging.ERROR,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.period_s = period_s
        self.level = level
        self.counts: Counter[str] = Counter()  # cause -> messages refused
        self._clock = clock
        self._logged_at: dict[str, float] = {}  # cause -> when its last line was written
        self._quiet: Counter[str] = Counter()  # cause -> refused since its last line, not logged
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def count(self, cause: str) -> int:
        with self._lock:
            return self.counts[cause]

    def invalid(self, what: str, exc: InvalidMessageError, level: int | None = None) -> None:
        """Refuse `what` (e.g. "transition of arm episode 3 step 2 on /arm/transitions") for `exc`."""
        self.refuse(exc.cause, f"{what}: {exc}", level)

    def refuse(self, cause: str, message: str, level: int | None = None) -> None:
        """Count one refusal of `cause`; log `message` unless this cause was logged less than `period_s` ago."""
        with self._lock:
            self.counts[cause] += 1
            now = self._clock()
            last = self._logged_at.get(cause)
            if last is not None and now - last < self.period_s:
                self._quiet[cause] += 1
                return
            self._logged_at[cause] = now
            quiet, self._quiet[cause] = self._quiet[cause], 0
        since = f" ({quiet} more refused for this cause since its last report)" if quiet else ""
        self.log.log(self.level if level is None else level, "refused %s%s", message, since)
