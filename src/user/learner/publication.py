"""Weights out until training diverges: `Publication` guards what the session publishes through its `WeightSink`
(the node's `WeightPublisher`, made after the session because it publishes the session's policy).

After each update call the session hands it the statistics the trainer recorded (losses, temperature, ...). The
first one that is not finite, or weights the sink refuses to publish (not finite), halts publication for good with
one error line naming the cause: robots keep the last good version, and the session writes no checkpoint any more
(the last one holds good weights).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Protocol

from user.sync.errors import WeightSyncError


class WeightSink(Protocol):
    """Where the session's weights go (`user.sync.WeightPublisher`)."""

    @property
    def version(self) -> int: ...

    def after_update(self) -> int | None: ...

    def publish_now(self) -> int: ...


class Publication:
    """Publishes through a sink unless halted; `halted` says why it stopped, for good."""

    def __init__(self, log: logging.Logger, published: Callable[[], int]) -> None:
        self.log = log
        self.halted: str | None = None  # why weights are no longer published (training diverged), if they are not
        self._published = published  # the newest version published (robots keep it once halted)

    def check(self, calls: int, stats: Mapping[str, float]) -> bool:
        """False once an update's losses or diagnostics were not finite (the policy is poisoned from then on)."""
        if self.halted is not None:
            return False
        bad = {k: v for k, v in stats.items() if not math.isfinite(v)}
        if bad:
            named = ", ".join(f"{k} = {v}" for k, v in sorted(bad.items()))
            self.halt(f"training diverged at update call {calls}: {named}")
        return not bad

    def publish(self, publish: Callable[[], int | None]) -> int | None:
        """The version `publish` (a sink's method) published; None when it published none, or when halted, or when
        the sink refused the weights (not finite), which halts publication."""
        if self.halted is not None:
            return None
        try:
            return publish()
        except WeightSyncError as exc:
            self.halt(str(exc))
            return None

    def halt(self, reason: str) -> None:
        """Stop publishing weights and writing checkpoints, for good, and say so once, loudly."""
        self.halted = reason
        self.log.error(
            "%s; weights are no longer published (robots keep acting with version %d, the last good one) and "
            "no checkpoint is written (the last one holds good weights); restart the learner from it",
            reason,
            self._published(),
        )
