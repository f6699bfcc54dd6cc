"""`CreditGate`: a robot that is not real time waits while it is ahead of the learner's update-to-data ratio.

The learner publishes its credit (`user/msg/DataCredit`, see `user.learner.data_credit`): how many more
transitions it can take at its ratio. The control thread `take`s one unit before each step; once the steps sent
since the last credit message reach it, `take` waits (with a deadline, so the loop still sees stop, reset and
e-stop) until a new credit comes. Before any credit message arrives nothing waits: a deployment without a pacing
learner (a recorder, a sync-mode learner) runs as fast as the robot can. A real-time robot never has a gate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

_log = logging.getLogger("user.robot_loop.data_credit")


class CreditGate:
    """Thread-safe: the bus thread notes credits, the control thread takes steps."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock  # what held_s is measured with
        self._credit: int | None = None  # the last credit heard (None: no learner paces this robot)
        self._sent = 0  # steps taken since that credit
        self._cond = threading.Condition()
        self.held = 0  # `take` calls that found the credit spent
        self.held_s = 0.0  # time spent waiting for credit

    def note(self, credit: int) -> None:
        """The learner's newest credit (transitions it can take now)."""
        with self._cond:
            self._credit, self._sent = credit, 0
            self._cond.notify_all()

    def on_message(self, msg: Any) -> None:
        """A user/msg/DataCredit message (bus callback)."""
        self.note(int(msg.credit))

    def take(self, timeout_s: float) -> bool:
        """Count one step, waiting up to `timeout_s` while the credit is spent; False: not taken, ask again."""
        with self._cond:
            if self._spent():
                if self.held == 0:
                    _log.info("ahead of the learner's update-to-data ratio: steps wait for its credit")
                self.held += 1
                start = self._clock()
                self._cond.wait_for(lambda: not self._spent(), timeout=max(0.0, timeout_s))
                self.held_s += self._clock() - start
                if self._spent():
                    return False
            self._sent += 1
            return True

    def _spent(self) -> bool:
        return self._credit is not None and self._sent >= self._credit
