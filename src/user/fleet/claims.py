"""`Claims`: several rollouts sharing one fleet, each robot served by exactly one (ROS-free, clocks given).

A rollout that would take a robot that joined at run time first claims it: it declares a liveliness token
`@user/claim/<robot>/<claimed at, ms since the epoch>/<rollout>` and watches every rollout's claims. The oldest
claim alive holds the robot (equal times: the smaller name), so a rollout that starts later never takes a robot
from one that serves it. A new claim serves only after `settle_s` without an older one seen (tokens take a moment
to cross), so two rollouts that claim at once do not both act for the robot: the younger withdraws. A token dies
with its process, so a robot whose rollout is gone is free again and the next rollout that can serve it takes it.
A robot of a rollout's `robots` list is that rollout's from its start to its end: its claim (`static_claim`) is
older than any, so a rollout that only admits it leaves it alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from user.bus.base import Handle
from user.bus.names import mangle, unmangle

CLAIM_PREFIX = "@user/claim"  # liveliness tokens: @user/claim/<robot>/<since, ms>/<node>
SETTLE_S = 1.0  # a new claim waits this long for an older one before its node serves the robot


@dataclass(frozen=True, order=True)
class Claim:
    """One node's claim on a robot; ordered: the older (then the smaller name) holds the robot."""

    since_ms: int  # when it was claimed, ms since the epoch
    node: str
    robot: str


STATIC_SINCE_MS = 0  # a listed robot's claim: older than any claim made at run time


def static_claim(declare: Callable[[str], Handle], node: str, robot: str) -> Handle:
    """`node` serves `robot` from its `robots` list: a claim no rollout admitting it at run time can be older than."""
    return declare(claim_key(Claim(STATIC_SINCE_MS, node, robot)))


def claim_key(claim: Claim) -> str:
    return f"{CLAIM_PREFIX}/{mangle(claim.robot)}/{claim.since_ms}/{mangle(claim.node)}"


def parse_claim_key(key: str) -> Claim | None:
    """The claim a token key names; None for any other key."""
    if not key.startswith(CLAIM_PREFIX + "/"):
        return None
    parts = key[len(CLAIM_PREFIX) + 1 :].split("/")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return Claim(int(parts[1]), unmangle(parts[2]), unmangle(parts[0]))


class Claims:
    """This node's claims and those it sees of others (`seen`, the token watch's callback). Thread-safe."""

    def __init__(
        self,
        me: str,
        declare: Callable[[str], Handle],
        settle_s: float = SETTLE_S,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.me = me
        self.settle_s = settle_s
        self._declare = declare
        self._wall_ms = wall_ms
        self._others: dict[str, set[Claim]] = {}  # robot -> other nodes' claims alive
        self._mine: dict[str, tuple[Claim, Handle, float]] = {}  # robot -> my claim, its token, when (monotonic)
        self._lock = threading.Lock()

    def seen(self, key: str, alive: bool) -> None:
        """A claim token appeared (True) or went (False)."""
        claim = parse_claim_key(key)
        if claim is None or claim.node == self.me:
            return
        with self._lock:
            claims = self._others.setdefault(claim.robot, set())
            if alive:
                claims.add(claim)
            else:
                claims.discard(claim)

    def holder(self, robot: str) -> str | None:
        """The other node whose claim on `robot` is older than mine (or, without mine, the oldest alive); None."""
        with self._lock:
            return self._older(robot)

    def claim(self, robot: str, now: float) -> str | None:
        """Whether this node may serve `robot` now: None when it may (its claim settled and is the oldest); else
        why not ("claiming", or "served by <node>", whose claim is older: then this node's claim is withdrawn)."""
        with self._lock:
            other = self._older(robot)
            if other is not None:
                self._withdraw(robot)
                return f"served by {other}"
            mine = self._mine.get(robot)
            if mine is None:
                claim = Claim(self._wall_ms(), self.me, robot)
                self._mine[robot] = (claim, self._declare(claim_key(claim)), now)
                return "claiming"
            return None if now - mine[2] >= self.settle_s else "claiming"

    def release(self, robot: str) -> None:
        """This node serves `robot` no more (it left, or an older claim holds it): its claim goes."""
        with self._lock:
            self._withdraw(robot)

    def close(self) -> None:
        with self._lock:
            for robot in list(self._mine):
                self._withdraw(robot)

    def _older(self, robot: str) -> str | None:
        others = self._others.get(robot)
        if not others:
            return None
        oldest = min(others)
        mine = self._mine.get(robot)
        return oldest.node if mine is None or oldest < mine[0] else None

    def _withdraw(self, robot: str) -> None:
        mine = self._mine.pop(robot, None)
        if mine is not None:
            mine[1].close()
