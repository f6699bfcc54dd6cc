"""`FleetWatch`: a node's `Roster` kept up to date from the hardware registry, and the node's wiring per robot.

Every `LOOK_PERIOD_S` it reads the robots announced alive (`user.hardware.Registry`: liveliness tokens and latched
descriptors, `user.hardware.announce`), lets the roster decide who joined and who left, and calls the node: `join`
subscribes a joined robot's topics and returns their handles, closed here when the robot leaves or is refused
(then `leave` lets the node forget the rest). With `probe`, a joined robot's observations are also read until the
first one fits the policy, so that a robot that does not fit is refused even when it sends no transition (it holds,
unanswered). Subscriptions are opened and closed on the node's timer, never inside a robot's own message callback.
The robots of the node's `robots` list are never looked at: served as always.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from user.bus.base import BEST_EFFORT, Handle
from user.fleet.admission import Authorisation, Mismatch, PolicySpec
from user.fleet.claims import CLAIM_PREFIX, Claims
from user.fleet.roster import Capacity, Roster
from user.hardware.registry import Registry
from user.interfaces.domain import Observation, Transition, observation_from_msg
from user.runtime.node import Node

OBSERVATION = "user/msg/Observation"
LOOK_PERIOD_S = 0.2  # how often the announced robots are looked at (a join is served within about this)


class FleetWatch:
    """Robots joining and leaving `node` at run time, as its `roster` decides."""

    def __init__(
        self,
        node: Node,
        roster: Roster,
        join: Callable[[str], list[Any]],
        leave: Callable[[str], object] = lambda robot: None,
        *,
        period_s: float = LOOK_PERIOD_S,
        probe: bool = True,
        wait: Callable[[str, str], object] = lambda robot, reason: None,
        elsewhere: Callable[[str, str], object] = lambda robot, holder: None,
    ) -> None:
        self.roster = roster
        self._wait = wait  # a robot told to wait, and why
        self._elsewhere = elsewhere  # a robot another node serves, and which
        self._node = node
        self._probe = probe and roster.spec is not None
        self._probes: dict[str, Handle] = {}  # robot taken in -> its observations, until one fitted
        self.registry = Registry(node)
        self._join, self._leave = join, leave
        self._handles: dict[str, list[Handle]] = {}  # joined robot -> its subscriptions (and publishers)
        self._lock = threading.Lock()  # a look and `close` never run at once (both close handles)
        self._closed = False
        claims = roster.claims
        self._claims = node.bus.watch_tokens(CLAIM_PREFIX, claims.seen) if claims is not None else None
        self._timer = node.create_timer(period_s, self.look)

    @property
    def spec(self) -> PolicySpec | None:
        return self.roster.spec

    def static(self, robot_id: str) -> bool:
        """One of the node's `robots`: served from start to end, never checked here."""
        return robot_id in self.roster.rule.robots

    def look(self) -> None:
        """Timer: who joined, who left, who was refused since the last look."""
        with self._lock:
            if not self._closed:
                self._look()

    def _look(self) -> None:
        alive = {d.resource_id: d for d in self.registry.descriptors("robot")}
        changes = self.roster.update(alive, time.monotonic())
        for robot_id in changes.left + self.roster.take_refused():
            self._drop(robot_id)
        for robot_id, reason in changes.waiting.items():
            self._wait(robot_id, reason)
        for robot_id, holder in changes.elsewhere.items():
            self._elsewhere(robot_id, holder)
        for robot_id in changes.joined:
            self._open(robot_id)
        for robot_id in [r for r in self._probes if self.roster.confirmed(r)]:
            self._probes.pop(robot_id).close()  # its observations fit: the node's own subscriptions go on

    def _open(self, robot_id: str) -> None:
        self._handles[robot_id] = self._join(robot_id)
        if self._probe:
            on_obs, topic = partial(self._on_probe, robot_id), f"/{robot_id}/observation"
            self._probes[robot_id] = self._node.create_subscription(topic, OBSERVATION, on_obs, BEST_EFFORT)

    def _drop(self, robot_id: str) -> None:
        self._leave(robot_id)  # the node forgets it first: nothing is sent on a closed publisher
        probe = self._probes.pop(robot_id, None)
        for handle in self._handles.pop(robot_id, []) + ([probe] if probe is not None else []):
            handle.close()

    def _on_probe(self, robot_id: str, msg: Any) -> None:
        """A joined robot's observation, until one fits: a misfit refuses it (one line)."""
        if not self.roster.confirmed(robot_id):
            self.takes(robot_id, observation_from_msg(msg))

    def takes(self, robot_id: str, item: Transition | Observation) -> bool:
        """Whether a message of `robot_id` is taken: a robot of `robots` always, a joined one while what it sends
        fits the policy (the first that does not refuses it, with one line)."""
        if self.static(robot_id):
            return True
        if not self.roster.serves(robot_id):
            return False
        spec = self.roster.spec
        if spec is None:
            return True
        mismatch: Mismatch | None = (
            spec.transition_mismatch(item) if isinstance(item, Transition) else spec.observation_mismatch(item)
        )
        if mismatch is not None:
            self.roster.refuse(robot_id, mismatch)
            return False
        self.roster.confirm(robot_id)
        return True

    def close(self) -> None:
        self._timer.close()
        if self._claims is not None:
            self._claims.close()
        with self._lock:  # a look running now ends first
            self._closed = True
            self.registry.close()
            if self.roster.claims is not None:
                self.roster.claims.close()
            for handles in [*self._handles.values(), list(self._probes.values())]:
                for handle in handles:
                    handle.close()
            self._handles.clear()
            self._probes.clear()


class FleetParams(Protocol):
    """The settings a node with a fleet has (`user.fleet.settings`)."""

    @property
    def robots(self) -> list[str]: ...

    @property
    def admit(self) -> list[str]: ...

    @property
    def leave_after_s(self) -> float: ...


def capacity_of(params: object, role: str) -> Capacity:
    """The node's `max_robots` and `site` settings, where it has them (a rollout), as its roster's `Capacity`."""
    return Capacity(int(getattr(params, "max_robots", 0)), str(getattr(params, "site", "")), role)


def watch_fleet(
    node: Node,
    params: FleetParams,
    spec: PolicySpec | None,
    join: Callable[[str], list[Any]],
    leave: Callable[[str], object] = lambda robot: None,
    *,
    probe: bool = True,
    capacity: Capacity | None = None,
    wait: Callable[[str, str], object] = lambda robot, reason: None,
    claim: bool = False,
    elsewhere: Callable[[str, str], object] = lambda robot, holder: None,
) -> FleetWatch | None:
    """The `FleetWatch` of a node with `admit` patterns; None without (its `robots` only, as always). `probe`: read
    a joined robot's observations until one fits (a node that reads them anyway checks them itself); `capacity`:
    which robots it can serve at once, the others told to `wait`; `claim`: share the fleet with other nodes that
    claim (rollouts: each robot served by one), a robot another serves passed to `elsewhere`."""
    if not params.admit:
        return None
    rule = Authorisation(tuple(params.robots), tuple(params.admit))
    claims = Claims(node.name, node.bus.declare_token) if claim else None
    roster = Roster(rule, spec, params.leave_after_s, node.log, capacity, claims=claims)
    return FleetWatch(node, roster, join, leave, probe=probe, wait=wait, elsewhere=elsewhere)
