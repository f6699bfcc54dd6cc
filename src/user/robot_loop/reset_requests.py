"""`ResetRequests`: an operator's reset, handed from the reset service's thread to the control thread and
answered back.

The service thread `ask`s and waits (with a deadline) until the control thread has `take`n the request and
reported it `done`: with None when the new episode started, or with the reason it did not (a latched
e-stop, an episode id that could not be saved). Only the control thread touches the robot; the asking
thread never holds a lock the bus's callbacks need, so the e-stop, actions and interventions go on while a
real arm drives home. `close` releases a waiting `ask` (the node is shutting down).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ResetOutcome:
    """How an asked reset ended."""

    served: bool  # the control thread carried the request out (or refused it) within the deadline
    refusal: str | None = None  # why no episode started; None when it did (or the request was not served)


class ResetRequests:
    """One pending reset request (the latest wins) between any asking thread and the control thread."""

    def __init__(self, wake: Callable[[], None] = lambda: None) -> None:
        self._wake = wake  # interrupts the control thread's wait for an action
        self._cond = threading.Condition()
        self._pending: int | None = None  # the seed code asked for
        self._served = 0
        self._refusal: str | None = None
        self._closed = False

    def ask(self, seed: int, timeout_s: float) -> ResetOutcome:
        """Ask for a reset with `seed` (a seed or a user/srv/Reset SEED_* code); wait `timeout_s` at most."""
        with self._cond:
            served = self._served
            self._pending = seed
            self._wake()
            done = self._cond.wait_for(lambda: self._served > served or self._closed, timeout_s)
            if not done or self._served == served:
                return ResetOutcome(False)
            return ResetOutcome(True, self._refusal)

    def take(self) -> int | None:
        """Control thread: the seed code of the request to carry out now, or None."""
        with self._cond:
            seed, self._pending = self._pending, None
            return seed

    def done(self, refusal: str | None) -> None:
        """Control thread: the taken request was carried out (`refusal` None) or refused for `refusal`."""
        with self._cond:
            self._served += 1
            self._refusal = refusal
            self._cond.notify_all()

    def close(self) -> None:
        """Release every waiting `ask` (served False): the control thread stops."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
