"""`WeightsInUse`: what a rollout reads of the weights its policy acts with, whichever way they arrive (the Bus's
`WeightSubscriber`, the co-located `WeightLinkReceiver`): the version in use, a consistent copy, and a wait for a
version. One condition guards the policy: a receiver applies a version whole while holding it and notifies."""

from __future__ import annotations

import threading
import time

from user.policies.base import FlatWeights, Policy


class WeightsInUse:
    """The reading side of a weight receiver (`user.acting.pinning.WeightSource`)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._changed = threading.Condition()  # held while a version is applied; notified after

    @property
    def lock(self) -> threading.Condition:
        """Held while a version is applied: hold it to act with, or read, the policy as one version."""
        return self._changed

    @property
    def version(self) -> int:
        """The weight version the policy acts with now."""
        with self._changed:
            return self.policy.version

    def snapshot(self) -> FlatWeights:
        """A copy of the weights in use now, with their version (consistent: never half applied)."""
        with self._changed:
            return self.policy.get_weights()

    def wait_for_version(self, version: int, timeout_s: float) -> bool:
        """Wait until `version` (or newer) is in use; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.policy.version < version:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True
