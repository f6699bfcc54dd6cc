"""Rate limiter: how many transitions the learner may sample per transition inserted (the update-to-data
ratio), and how many must be stored before the first batch. Inserts are never blocked: robots never wait
for the learner; only sampling waits, always with a deadline."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from user.buffer.config import RateLimiterConfig


@dataclass(frozen=True)
class LimiterCounts:
    """What a rate limiter has counted and is set to, read together (one consistent moment)."""

    inserted: int  # transitions stored (a resumed run's included)
    sampled: int  # transitions sampled by the learner
    samples_per_insert: float  # the set update-to-data ratio, in sampled rows per stored transition; 0: none
    min_size: int  # transitions stored before the first batch
    budget: float  # samples the ratio allows for `inserted`, without the error buffer (`RateLimiter.budget`)


class RateLimiter:
    """Allows sampling k more transitions while samples + k <= budget + error_buffer, where the budget is
    spi * (inserts - min_size), once min_size transitions are stored (without a ratio: any k)."""

    def __init__(self, samples_per_insert: float = 0.0, min_size: int = 0, error_buffer: float = 1024.0) -> None:
        self.samples_per_insert = samples_per_insert
        self.min_size = min_size
        self.error_buffer = error_buffer
        self.inserts = 0
        self.samples = 0
        self._cond = threading.Condition()
        self._closed = False

    @classmethod
    def from_config(cls, config: RateLimiterConfig) -> RateLimiter:
        return cls(config.samples_per_insert, config.min_size, config.error_buffer)

    def _budget(self) -> float:
        return float(self.samples_per_insert) * (self.inserts - self.min_size)

    def _allowed(self, k: int) -> bool:
        if self.inserts < self.min_size:
            return False
        if self.samples_per_insert <= 0:
            return True
        return self.samples + k <= self._budget() + self.error_buffer

    def budget(self) -> float:
        """Transitions the set ratio lets the learner sample for those stored so far, without the error buffer:
        samples_per_insert * (inserts - min_size); 0 or less without a ratio or while the minimum is not stored."""
        with self._cond:
            return self._budget()

    def counts(self) -> LimiterCounts:
        """The counts and settings, read at one moment."""
        with self._cond:
            return LimiterCounts(
                inserted=self.inserts,
                sampled=self.samples,
                samples_per_insert=float(self.samples_per_insert),
                min_size=self.min_size,
                budget=self._budget(),
            )

    def can_sample(self, k: int) -> bool:
        with self._cond:
            return self._allowed(k)

    def insert(self, n: int = 1) -> None:
        """`n` transitions were stored."""
        with self._cond:
            self.inserts += n
            self._cond.notify_all()

    def acquire(self, k: int, timeout_s: float) -> bool:
        """Wait until `k` transitions may be sampled, then count them; False at the deadline or on close."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        with self._cond:
            while not self._closed and not self._allowed(k):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            if self._closed:
                return False
            self.samples += k
            return True

    def wait_for_insert(self, timeout_s: float) -> bool:
        """Wait until something is inserted (or the limiter closes); False at the deadline."""
        with self._cond:
            seen = self.inserts
            return self._cond.wait_for(lambda: self.inserts != seen or self._closed, timeout=max(0.0, timeout_s))

    def ratio(self) -> float:
        """Transitions sampled per transition inserted so far."""
        with self._cond:
            return self.samples / self.inserts if self.inserts else 0.0

    def close(self) -> None:
        """Wake every waiter; later acquires fail at once."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def state_dict(self) -> dict[str, Any]:
        with self._cond:
            return {
                "inserts": self.inserts,
                "samples": self.samples,
                "samples_per_insert": self.samples_per_insert,
                "min_size": self.min_size,
                "error_buffer": self.error_buffer,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._cond:
            self.inserts = int(state["inserts"])
            self.samples = int(state["samples"])
            self.samples_per_insert = float(state.get("samples_per_insert", self.samples_per_insert))
            self.min_size = int(state.get("min_size", self.min_size))
            self.error_buffer = float(state.get("error_buffer", self.error_buffer))
            self._cond.notify_all()
