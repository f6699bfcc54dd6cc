"""`TrainedEpisodes`: which policy version was first trained on each robot's episode (sync mode).

In sync mode the learner trains after each stored episode, publishes, and then sends the episode's robot a
second receipt (`user/msg/EpisodeAck` with `policy_version` > 0). The rollout starts the robot's next episode
only once it holds that receipt and that version. The receipt defines what to wait for, so the order in which
the END event, the receipt and the weights arrive does not matter: a version published before the END event
was seen is not waited for again, and a version trained on another robot's episode does not release this one.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

MAX_KEPT = 10_000  # receipts kept (oldest forgotten first): far more than the episodes waited for at once


class TrainedEpisodes:
    """Thread-safe: the bus thread notes receipts, reset threads wait for them (with a deadline)."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self._versions: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._max_kept = max_kept
        self._cond = threading.Condition()

    def note(self, robot_id: str, episode_id: int, version: int) -> None:
        """The learner's receipt: `version` is the first one trained on (robot, episode); 0 is no such receipt."""
        if version <= 0:
            return
        with self._cond:
            key = (robot_id, episode_id)
            self._versions[key] = max(version, self._versions.get(key, 0))
            self._versions.move_to_end(key)
            while len(self._versions) > self._max_kept:
                self._versions.popitem(last=False)
            self._cond.notify_all()

    def wait(self, robot_id: str, episode_id: int, timeout_s: float) -> int | None:
        """The version trained on (robot, episode), waiting up to `timeout_s` for its receipt; None at the deadline."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        key = (robot_id, episode_id)
        with self._cond:
            while key not in self._versions:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            return self._versions[key]
