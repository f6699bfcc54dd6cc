"""`Roster`: the robots a node serves while robots join and leave a running experiment (ROS-free, clock given).

Fed the robots announced alive (their descriptors, from the hardware registry) at each look (`update`), it says who
joined and who left: a robot is taken in when the deployment authorises it (`Authorisation`) and its announcement
fits the policy (`PolicySpec`), and it has joined, with one line, once the first of its messages fits too
(`confirm`; at once where there is no policy to fit). An unauthorised robot and one that does not fit are refused
with one line each, again only after their announcement went away and came back. A robot that
joined and whose announcement is gone (stopped, killed, its host lost) is dropped once it has been gone
`leave_after_s`; back before that, it never left. A robot that joined and then sends what does not fit is refused
(`refuse`) and leaves at the next look. The robots of the node's `robots` list are not the roster's: they are
served from the start to the end, as without a roster.

Scheduling (`Capacity`): a node that can serve only so many robots (`max_robots`), or only those of its own site
(`site`), takes an admitted robot that fits only while it can; otherwise the robot waits, told why once (and again
when the reason changes: `Changes.waiting`), holding, and is taken at the first look after a place frees up (a
robot left) in the order the robots started waiting. A waiting robot whose announcement goes is forgotten.

Several rollouts sharing one fleet (`Claims`): a robot another rollout holds is not taken (nor told to wait here:
`Changes.elsewhere`); one this node could serve is claimed first and served once the claim has settled; one it
serves but another rollout holds by an older claim (they claimed at once) is released at once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from user.fleet.admission import Authorisation, Mismatch, PolicySpec
from user.fleet.claims import Claims
from user.hardware.descriptor import ResourceDescriptor


@dataclass
class Changes:
    """What one look changed: robots to serve from now on, robots to serve no more, robots told to wait (why)."""

    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # robot -> why it waits (new, or a new reason)
    elsewhere: dict[str, str] = field(default_factory=dict)  # robot -> the node that serves it (newly seen)


@dataclass(frozen=True)
class Capacity:
    """Which admitted robots a node can serve at once (the placement rules at run time)."""

    max_robots: int = 0  # robots joined at run time served at once; 0 = no limit
    site: str = ""  # serve only robots announced at this site; empty = any site
    role: str = "node"  # what the node is, for the lines ("rollout")

    def unmet(self, descriptor: ResourceDescriptor, serving: list[str]) -> str | None:
        """Why `descriptor`'s robot cannot be served beside `serving`, or None."""
        if self.site and descriptor.site != self.site:
            return (
                f"it is at site {descriptor.site!r} and this {self.role} serves site {self.site!r} (its observations "
                "and actions would cross sites at every step)"
            )
        if self.max_robots and len(serving) >= self.max_robots:
            return f"this {self.role} serves its {self.max_robots} robot(s) already ({', '.join(serving)})"
        return None


class Roster:
    """Robots joined at run time, with the deadline of those whose announcement is gone. Thread-safe."""

    def __init__(
        self,
        rule: Authorisation,
        spec: PolicySpec | None,
        leave_after_s: float,
        log: logging.Logger,
        capacity: Capacity | None = None,
        *,
        claims: Claims | None = None,
    ) -> None:
        self.rule = rule
        self.claims = claims  # None: this node serves every robot it admits (a learner, a monitor)
        self.capacity = capacity or Capacity()
        self.spec = spec  # None: no policy to fit (e.g. a monitor)
        self.leave_after_s = leave_after_s
        self.log = log
        self._joined: set[str] = set()  # taken in: its topics are subscribed
        self._confirmed: set[str] = set()  # joined: what it sends fits (its "joined" line written)
        self._described: dict[str, ResourceDescriptor] = {}  # taken in -> its announcement
        self._gone_since: dict[str, float] = {}  # joined robot -> when its announcement was first seen gone
        self._refused: set[str] = set()  # announced robots refused (until their announcement goes away)
        self._dropped: list[str] = []  # refused by `refuse` since the node last took them
        self._waiting: dict[str, str] = {}  # admitted robots that fit but cannot be served now -> why (in order)
        self._elsewhere: dict[str, str] = {}  # robots another node holds -> that node
        self._lock = threading.RLock()  # `update` confirms under it

    def serves(self, robot_id: str) -> bool:
        """The robot joined and was not refused or dropped since (its messages are taken)."""
        with self._lock:
            return robot_id in self._joined

    def confirmed(self, robot_id: str) -> bool:
        with self._lock:
            return robot_id in self._confirmed

    def confirm(self, robot_id: str) -> None:
        """A message of a robot taken in fits the policy: it has joined (one line, the first time)."""
        with self._lock:
            if robot_id not in self._joined or robot_id in self._confirmed:
                return
            self._confirmed.add(robot_id)
            descriptor = self._described[robot_id]
        self.log.info(
            "robot %s joined (%s at site %s, task %s)",
            robot_id,
            descriptor.model or "unknown model",
            descriptor.site,
            descriptor.properties.get("task", "?"),
        )

    @property
    def joined(self) -> list[str]:
        with self._lock:
            return sorted(self._joined)

    @property
    def waiting(self) -> dict[str, str]:
        """Robots waiting for a place -> why, in the order they started waiting."""
        with self._lock:
            return dict(self._waiting)

    def update(self, alive: dict[str, ResourceDescriptor], now: float) -> Changes:
        """One look at the robots announced alive (id -> descriptor) at time `now` (seconds, monotonic)."""
        changes = Changes()
        with self._lock:
            for robot_id in sorted(self._joined):
                self._follow(robot_id, robot_id in alive, now, changes)  # who left first: their places free up
            for robot_id in [r for r in self._waiting if r not in alive]:
                del self._waiting[robot_id]  # gone while waiting: judged afresh when it comes back
            for robot_id in [r for r in self._elsewhere if r not in alive]:
                del self._elsewhere[robot_id]
            waited = [r for r in self._waiting if r in alive]  # first come, first served
            for robot_id in waited + sorted(r for r in alive if r not in self._waiting):
                if robot_id not in self.rule.robots:
                    self._judge(alive[robot_id], changes, now)
            self._refused &= set(alive)  # gone: judged afresh when it announces itself again
        return changes

    def refuse(self, robot_id: str, mismatch: Mismatch) -> bool:
        """A joined robot sent what does not fit: refused with one line (True), left at the next look; False when it
        was refused already (nothing written)."""
        with self._lock:
            if robot_id not in self._joined:
                return False
            self._forget(robot_id)
            self._refused.add(robot_id)
            self._dropped.append(robot_id)
        self._log_misfit(robot_id, mismatch)
        return True

    def _log_misfit(self, robot_id: str, mismatch: Mismatch) -> None:
        self.log.error("refused robot %s: %s does not fit the policy (%s)", robot_id, mismatch.field, mismatch.detail)

    def take_refused(self) -> list[str]:
        """Robots refused by `refuse` since the last call: the node drops their subscriptions now."""
        with self._lock:
            dropped, self._dropped = self._dropped, []
        return dropped

    # ---- one look -------------------------------------------------------------------------------

    def _judge(self, descriptor: ResourceDescriptor, changes: Changes, now: float) -> None:
        robot_id = descriptor.resource_id
        if robot_id in self._joined or robot_id in self._refused:
            return
        if not self.rule.allows(robot_id):
            self._refused.add(robot_id)
            self.log.warning("refused robot %s: not admitted by this deployment (%s)", robot_id, self.rule.describe())
            return
        mismatch = self.spec.descriptor_mismatch(descriptor) if self.spec is not None else None
        if mismatch is not None:
            self._refused.add(robot_id)
            self.log.error(
                "refused robot %s: %s does not fit the policy (%s)", robot_id, mismatch.field, mismatch.detail
            )
            return
        holder = self.claims.holder(robot_id) if self.claims is not None else None
        if holder is not None:  # another rollout serves it: neither taken nor told to wait here
            self._waiting.pop(robot_id, None)
            self._served_elsewhere(robot_id, holder, changes)
            return
        reason = self.capacity.unmet(descriptor, sorted(self._joined))
        if reason is not None:
            if self._waiting.get(robot_id) != reason:
                self._waiting[robot_id] = reason
                changes.waiting[robot_id] = reason
                self.log.warning("robot %s waits: %s; it holds until it can be served", robot_id, reason)
            return
        if self.claims is not None and self.claims.claim(robot_id, now) is not None:
            return  # claimed, not settled yet (or an older claim appeared meanwhile: the next look says whose)
        self._elsewhere.pop(robot_id, None)
        if self._waiting.pop(robot_id, None) is not None:
            self.log.info("robot %s no longer waits: served from now on", robot_id)
        self._joined.add(robot_id)
        self._described[robot_id] = descriptor
        changes.joined.append(robot_id)
        if self.spec is None:  # nothing to fit: joined now
            self.confirm(robot_id)

    def _served_elsewhere(self, robot_id: str, holder: str, changes: Changes) -> None:
        if self._elsewhere.get(robot_id) == holder:
            return
        self._elsewhere[robot_id] = holder
        changes.elsewhere[robot_id] = holder
        self.log.info("robot %s is served by %s (its claim is older): not served here", robot_id, holder)

    def _follow(self, robot_id: str, announced: bool, now: float, changes: Changes) -> None:
        holder = self.claims.holder(robot_id) if self.claims is not None else None
        if holder is not None:  # claimed at about the same time as another rollout, whose claim is older
            self._forget(robot_id)
            changes.left.append(robot_id)
            self._served_elsewhere(robot_id, holder, changes)
            return
        if announced:
            if self._gone_since.pop(robot_id, None) is not None:
                self.log.info("robot %s is back before its deadline: still served", robot_id)
            return
        since = self._gone_since.setdefault(robot_id, now)
        if now - since >= self.leave_after_s:
            self._forget(robot_id)
            changes.left.append(robot_id)
            self.log.warning(
                "robot %s left: its announcement has been gone %.1f s; dropped, the run goes on", robot_id, now - since
            )

    def _forget(self, robot_id: str) -> None:
        if self.claims is not None:
            self.claims.release(robot_id)
        self._joined.discard(robot_id)
        self._confirmed.discard(robot_id)
        self._described.pop(robot_id, None)
        self._gone_since.pop(robot_id, None)
