"""Scheduling as robots come and go (issue 36, item 3): a roster with a `Capacity` takes admitted robots that fit only
while it can serve them (its `max_robots`, its `site`); the others wait, told why once, and are taken, first come
first served, at the first look after a place frees up; a waiting robot that goes away is forgotten."""

from __future__ import annotations

import logging

import pytest

from test.fleet.test_roster import LOG, robot
from user.fleet.admission import Authorisation, PolicySpec
from user.fleet.roster import Capacity, Roster
from user.hardware.descriptor import ResourceDescriptor


def roster(capacity: Capacity) -> Roster:
    return Roster(Authorisation((), ("arm_*",)), PolicySpec(state_dim=17, action_dim=7), 2.0, LOG, capacity)


def test_a_full_rollout_makes_the_next_robots_wait_until_one_leaves(caplog: pytest.LogCaptureFixture) -> None:
    r = roster(Capacity(max_robots=1, role="rollout"))
    three = {name: robot(name) for name in ("arm_a", "arm_b", "arm_c")}
    with caplog.at_level(logging.INFO, LOG.name):
        first = r.update({"arm_a": three["arm_a"]}, 0.0)
        later = r.update(three, 1.0)  # b and c come while a is served
        again = r.update(three, 1.5)
    assert first.joined == ["arm_a"] and later.joined == [] and again.joined == []
    reason = "this rollout serves its 1 robot(s) already (arm_a)"
    assert later.waiting == {"arm_b": reason, "arm_c": reason} and again.waiting == {}  # told once
    assert list(r.waiting) == ["arm_b", "arm_c"]
    assert caplog.messages.count(f"robot arm_b waits: {reason}; it holds until it can be served") == 1
    del three["arm_a"]  # a stops: gone past the deadline, it leaves and b (waiting first) takes its place
    with caplog.at_level(logging.INFO, LOG.name):
        r.update(three, 2.0)
        freed = r.update(three, 4.5)
    assert freed.left == ["arm_a"] and freed.joined == ["arm_b"]
    assert freed.waiting == {"arm_c": "this rollout serves its 1 robot(s) already (arm_b)"}  # told the new reason
    assert r.joined == ["arm_b"] and list(r.waiting) == ["arm_c"]
    assert "robot arm_b no longer waits: served from now on" in caplog.messages


def test_a_robot_at_another_site_waits_and_one_that_goes_away_is_forgotten() -> None:
    r = roster(Capacity(site="cloud", role="rollout"))
    lab = robot("arm_l")  # announced at site lab
    told = r.update({"arm_l": lab}, 0.0).waiting
    assert told == {"arm_l": "it is at site 'lab' and this rollout serves site 'cloud' (its observations and "
                              "actions would cross sites at every step)"}  # fmt: skip
    assert r.update({}, 1.0).waiting == {} and r.waiting == {}  # gone: forgotten
    moved = ResourceDescriptor("arm_l", "robot", model="sim", site="cloud")
    assert r.update({"arm_l": moved}, 2.0).joined == ["arm_l"]  # back, at the rollout's site: served


def test_without_limits_every_admitted_robot_is_served() -> None:
    r = roster(Capacity())
    fleet = {f"arm_{i}": robot(f"arm_{i}") for i in range(5)}
    assert r.update(fleet, 0.0).joined == sorted(fleet) and r.waiting == {}
