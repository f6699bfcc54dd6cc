"""`DataCredit`: how many more transitions robots that can wait may send, so that the update-to-data ratio the
learner is set to is the one that happens (async mode).

The buffer's rate limiter holds the learner back when it would sample more than the ratio allows; this holds the
other side back. The credit is what the learner has trained for since it started, at its ratio, less the
transitions it received since, plus `tolerance`:

    credit = tolerance + warm-up still owed + (rows sampled since start) / (rows per transition) - received since

The warm-up is the part of `min_size` the buffer lacked at start (no training happens before it is there). Data
in the buffer when the learner started (a resumed run, imported demonstrations) is neither owed nor counted: robots
are not held until the learner has trained over the past.

The buffer stores whole episodes, so transitions of episodes still running are received but not yet stored. When
the learner itself waits for data (its limiter refuses a batch: the warm-up is not complete, or it is ahead of the
stored data), the credit counts stored transitions instead of received ones, so robots finish their episodes and
neither side waits for the other for ever.

A robot that is not real time waits while its transitions since the last credit message reach the credit
(`user.robot_loop.data_credit`); one that is real time never waits, and the learner reports the ratio it reached.
"""

from __future__ import annotations

import math

from user.buffer.rate_limiter import RateLimiter


class DataCredit:
    """The credit of one learner's rate limiter, counted from the moment this is made (after any resume)."""

    def __init__(self, limiter: RateLimiter, tolerance: int, batch_rows: int, received: int) -> None:
        """`batch_rows`: rows one update call samples; `received`: transitions received so far (the base)."""
        if tolerance < 1:
            raise ValueError(f"tolerance must be at least 1 transition, got {tolerance}")
        self._limiter = limiter
        self.tolerance = tolerance
        self._batch_rows = batch_rows
        start = limiter.counts()
        self._inserts0 = start.inserted
        self._samples0 = start.sampled
        self._received0 = received
        self._warmup = max(0, start.min_size - self._inserts0)

    def credit(self, received: int) -> int | None:
        """Transitions that may still be sent, given `received` so far; None when the limiter has no ratio."""
        now = self._limiter.counts()
        if now.samples_per_insert <= 0:
            return None
        owed = self.tolerance + self._warmup + math.floor((now.sampled - self._samples0) / now.samples_per_insert)
        strict = owed - (received - self._received0)
        if self._limiter.can_sample(self._batch_rows):
            return strict
        return max(strict, owed - (now.inserted - self._inserts0))  # the learner waits for stored data
