"""`PinnedPolicies`: which weight version each robot acts with, and one policy copy per version in use.

A robot is pinned to the version that is newest when its episode starts (`immediate=False`, the rollout's
`apply: episode_boundary`), or to the newest at every step (`immediate=True`). Robots on different versions act
with different policy copies, so one robot's episode boundary never changes another's policy mid-episode; a copy
no robot is pinned to any more is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from user.policies.base import FlatWeights, Policy


class WeightSource(Protocol):
    """Where the newest complete weights are (the rollout's `user.sync.WeightSubscriber`, applied at once)."""

    @property
    def version(self) -> int: ...

    def snapshot(self) -> FlatWeights: ...

    def wait_for_version(self, version: int, timeout_s: float) -> bool: ...


class PinnedPolicies:
    """Version pinning per robot over a cache of policy copies; used by one thread (the inference thread)."""

    def __init__(self, build: Callable[[], Policy], weights: WeightSource, *, immediate: bool = False) -> None:
        self._build = build  # a fresh policy of the learner's layout
        self._weights = weights
        self._immediate = immediate
        self._policies: dict[int, Policy] = {}  # version -> a policy copy some robot is pinned to
        self._pinned: dict[str, int] = {}  # robot -> version it acts with
        self._episode: dict[str, int] = {}  # robot -> episode id of its pinned version

    def version_for(self, robot: str, episode_id: int) -> int:
        """The version `robot` acts with now in episode `episode_id` (pins the newest at an episode boundary)."""
        newest = self._weights.version
        if self._immediate or self._episode.get(robot) != episode_id:
            if newest not in self._policies:
                copy = self._build()
                copy.load_weights(self._weights.snapshot())
                newest = copy.version  # the snapshot may be newer than the version read above
                self._policies[newest] = copy
            self._pinned[robot] = newest
            self._episode[robot] = episode_id
            self._drop_unused()
        return self._pinned[robot]

    def forget(self, robot: str) -> None:
        """`robot` acts no more: its pin goes, and the copy of its version if no other robot is pinned to it."""
        self._pinned.pop(robot, None)
        self._episode.pop(robot, None)
        self._drop_unused()

    def _drop_unused(self) -> None:
        in_use = set(self._pinned.values())
        for v in [v for v in self._policies if v not in in_use]:
            del self._policies[v]

    def policy(self, version: int) -> Policy:
        """The policy copy of `version` (one some robot is pinned to)."""
        return self._policies[version]

    @property
    def versions(self) -> list[int]:
        """The versions held as policy copies, oldest first."""
        return sorted(self._policies)
