"""Several rollouts sharing one fleet (issue 36, item 3): each robot that joins is served by exactly one. A rollout
claims a robot before serving it and serves once its claim settled; the oldest claim alive holds the robot, so a
rollout started later never takes it, two that claim at once end with one, and a robot whose rollout is gone is
taken by the next. Driven by clocks of the test's own; the tokens cross between the rosters at once."""

from __future__ import annotations

import logging

import pytest

from test.fleet.test_roster import LOG, robot
from user.fleet.admission import Authorisation, PolicySpec
from user.fleet.claims import Claim, Claims, claim_key, parse_claim_key, static_claim
from user.fleet.roster import Capacity, Roster
from user.hardware.descriptor import ResourceDescriptor


class Tokens:
    """A liveliness space shared by the rosters: a declared token is seen by every watcher at once."""

    def __init__(self) -> None:
        self.alive: set[str] = set()
        self.watchers: list[Claims] = []

    def declare(self, key: str) -> Token:
        self.alive.add(key)
        for claims in self.watchers:
            claims.seen(key, True)
        return Token(self, key)

    def drop(self, key: str) -> None:
        self.alive.discard(key)
        for claims in self.watchers:
            claims.seen(key, False)


class Token:
    def __init__(self, space: Tokens, key: str) -> None:
        self.space, self.key = space, key

    def close(self) -> None:
        self.space.drop(self.key)


class WallClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def rollout(name: str, space: Tokens, wall: WallClock, capacity: Capacity | None = None) -> Roster:
    claims = Claims(name, space.declare, settle_s=1.0, wall_ms=wall)
    for key in space.alive:
        claims.seen(key, True)  # the current tokens first, as watch_tokens does
    space.watchers.append(claims)
    spec = PolicySpec(state_dim=17, action_dim=7)
    return Roster(Authorisation((), ("arm_*",)), spec, 2.0, LOG, capacity or Capacity(role="rollout"), claims=claims)


def test_a_claim_key_names_robot_time_and_node() -> None:
    claim = Claim(1_733_000_000_123, "rollout/a", "arm_1")
    assert parse_claim_key(claim_key(claim)) == claim
    assert parse_claim_key("@user/hw/robot/arm_1") is None and parse_claim_key("@user/claim/arm_1/x/r") is None
    assert Claim(5, "b", "arm") < Claim(6, "a", "arm") and Claim(5, "a", "arm") < Claim(5, "b", "arm")


def test_a_robot_is_served_once_its_claim_settled() -> None:
    space, wall = Tokens(), WallClock()
    a = rollout("rollout_a", space, wall)
    fleet = {"arm_1": robot("arm_1")}
    assert a.update(fleet, 0.0).joined == []  # claimed: not served before the claim settled
    assert any(key.startswith("@user/claim/arm_1/") for key in space.alive)
    assert a.update(fleet, 0.5).joined == []
    assert a.update(fleet, 1.0).joined == ["arm_1"]


def test_a_rollout_started_later_leaves_the_robot_to_the_one_that_serves_it(caplog: pytest.LogCaptureFixture) -> None:
    space, wall = Tokens(), WallClock()
    a = rollout("rollout_z", space, wall)  # a later name: the older claim wins, not the smaller name
    fleet = {"arm_1": robot("arm_1")}
    a.update(fleet, 0.0)
    a.update(fleet, 1.0)
    wall.ms += 5000
    with caplog.at_level(logging.INFO, LOG.name):
        b = rollout("rollout_a", space, wall, Capacity(max_robots=1, role="rollout"))
        looks = [b.update(fleet, t) for t in (0.0, 1.0, 2.0)]
    assert all(look.joined == [] and look.waiting == {} for look in looks)  # neither served nor told to wait
    assert looks[0].elsewhere == {"arm_1": "rollout_z"} and looks[1].elsewhere == {}  # said once
    assert "robot arm_1 is served by rollout_z (its claim is older): not served here" in caplog.messages
    assert a.joined == ["arm_1"] and b.joined == [] and a.update(fleet, 3.0).left == []
    assert [k for k in space.alive if k.endswith("/rollout_a")] == []  # b never claimed it


def test_two_rollouts_claiming_at_once_end_with_one() -> None:
    space, wall = Tokens(), WallClock()
    a, b = rollout("rollout_a", space, wall), rollout("rollout_b", space, wall)
    fleet = {"arm_1": robot("arm_1")}
    a.update(fleet, 0.0)
    b.update(fleet, 0.0)  # the same millisecond: the smaller name holds it
    for t in (1.0, 2.0):
        a.update(fleet, t)
        b.update(fleet, t)
    assert a.joined == ["arm_1"] and b.joined == []
    assert [k.rsplit("/", 1)[1] for k in space.alive] == ["rollout_a"]  # b's claim withdrawn


def test_a_rollout_that_served_first_releases_the_robot_to_an_older_claim() -> None:
    """Tokens cross with a delay: b served before a's older claim reached it; then it releases at once."""
    space, wall = Tokens(), WallClock()
    b = rollout("rollout_b", space, wall)
    fleet = {"arm_1": robot("arm_1")}
    b.update(fleet, 0.0)
    assert b.update(fleet, 1.0).joined == ["arm_1"]
    space.declare(claim_key(Claim(wall.ms - 10, "rollout_a", "arm_1")))  # a claimed 10 ms before b; seen only now
    look = b.update(fleet, 1.2)
    assert look.left == ["arm_1"] and look.elsewhere == {"arm_1": "rollout_a"} and b.joined == []
    assert not any(k.endswith("/rollout_b") for k in space.alive)  # b's claim went with it


def test_a_robot_whose_rollout_is_gone_is_taken_by_the_next() -> None:
    space, wall = Tokens(), WallClock()
    a, b = rollout("rollout_a", space, wall), rollout("rollout_b", space, wall)
    fleet: dict[str, ResourceDescriptor] = {"arm_1": robot("arm_1")}
    a.update(fleet, 0.0)
    a.update(fleet, 1.0)
    assert b.update(fleet, 1.0).elsewhere == {"arm_1": "rollout_a"}
    assert a.claims is not None
    a.claims.close()  # rollout_a's process died: its tokens went with it
    wall.ms += 3000
    assert b.update(fleet, 4.0).joined == []  # claims it now
    assert b.update(fleet, 5.0).joined == ["arm_1"]


def test_a_robot_listed_by_a_rollout_is_left_to_it_by_one_admitting_it() -> None:
    space, wall = Tokens(), WallClock()
    a = rollout("rollout_a", space, wall)
    fleet = {"arm_1": robot("arm_1")}
    a.update(fleet, 0.0)
    assert a.update(fleet, 1.0).joined == ["arm_1"]  # served by admission first ...
    static_claim(space.declare, "rollout_z", "arm_1")  # ... then a rollout listing it starts: it is that one's
    look = a.update(fleet, 1.2)
    assert look.left == ["arm_1"] and look.elsewhere == {"arm_1": "rollout_z"}
