"""`Roster`: who joins, who is refused (one line each), who leaves after the deadline, on a clock of the test's."""

from __future__ import annotations

import logging

import pytest

from user.fleet.admission import Authorisation, Mismatch, PolicySpec
from user.fleet.roster import Roster
from user.hardware.descriptor import ResourceDescriptor

LOG = logging.getLogger("test.fleet.roster")


def robot(robot_id: str, **properties: str) -> ResourceDescriptor:
    return ResourceDescriptor(robot_id, "robot", model="sim", site="lab", properties=properties)


def roster(leave_after_s: float = 5.0) -> Roster:
    spec = PolicySpec(state_dim=17, action_dim=7)
    return Roster(Authorisation(("static_arm",), ("arm_*",)), spec, leave_after_s, LOG)


def test_an_admitted_robot_is_taken_in_and_joins_once_what_it_sends_fits(caplog: pytest.LogCaptureFixture) -> None:
    r = roster()
    with caplog.at_level(logging.INFO, LOG.name):
        assert r.update({"arm_a": robot("arm_a")}, 0.0).joined == ["arm_a"]  # its topics are subscribed
        assert r.update({"arm_a": robot("arm_a")}, 1.0).joined == []
        assert r.serves("arm_a") and not r.confirmed("arm_a") and caplog.messages == []
        r.confirm("arm_a")
        r.confirm("arm_a")
    assert r.confirmed("arm_a") and r.joined == ["arm_a"]
    assert caplog.messages == ["robot arm_a joined (sim at site lab, task ?)"]


def test_without_a_policy_to_fit_a_robot_joins_at_once(caplog: pytest.LogCaptureFixture) -> None:
    r = Roster(Authorisation((), ("arm_*",)), None, 1.0, LOG)
    with caplog.at_level(logging.INFO, LOG.name):
        assert r.update({"arm_a": robot("arm_a", task="peg")}, 0.0).joined == ["arm_a"]
    assert r.confirmed("arm_a") and caplog.messages == ["robot arm_a joined (sim at site lab, task peg)"]


def test_the_robots_list_is_not_the_rosters() -> None:
    r = roster()
    changes = r.update({"static_arm": robot("static_arm")}, 0.0)
    assert changes.joined == [] and not r.serves("static_arm")
    assert r.update({}, 100.0).left == []


def test_unauthorised_and_misfit_robots_are_refused_with_one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    r = roster()
    alive = {"rogue": robot("rogue"), "arm_c": robot("arm_c", action_dim="8")}
    with caplog.at_level(logging.INFO, LOG.name):
        for now in (0.0, 1.0, 2.0):
            assert r.update(alive, now).joined == []
    assert caplog.messages == [
        "refused robot arm_c: action_dim does not fit the policy (announced 8, the policy needs 7)",
        "refused robot rogue: not admitted by this deployment (robots [static_arm], admit [arm_*])",
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, LOG.name):
        r.update({}, 3.0)  # gone: judged afresh when it comes back
        r.update({"rogue": robot("rogue")}, 4.0)
    assert len(caplog.messages) == 1 and "refused robot rogue" in caplog.messages[0]


def test_a_robot_gone_past_the_deadline_leaves_and_may_join_again(caplog: pytest.LogCaptureFixture) -> None:
    r = roster(leave_after_s=5.0)
    r.update({"arm_a": robot("arm_a")}, 0.0)
    with caplog.at_level(logging.INFO, LOG.name):
        assert r.update({}, 10.0).left == []  # the deadline starts when it is first seen gone
        assert r.update({}, 14.9).left == []
        assert r.serves("arm_a")
        assert r.update({}, 15.0).left == ["arm_a"]
        assert r.update({}, 30.0).left == []
    assert not r.serves("arm_a")
    assert [m for m in caplog.messages if "left" in m] == [
        "robot arm_a left: its announcement has been gone 5.0 s; dropped, the run goes on"
    ]
    assert r.update({"arm_a": robot("arm_a")}, 31.0).joined == ["arm_a"]


def test_back_before_the_deadline_it_never_left() -> None:
    r = roster(leave_after_s=5.0)
    r.update({"arm_a": robot("arm_a")}, 0.0)
    r.update({}, 1.0)
    changes = r.update({"arm_a": robot("arm_a")}, 4.0)
    assert changes.joined == [] and changes.left == []
    assert r.update({}, 8.0).left == []  # a new absence, a new deadline
    assert r.update({}, 13.0).left == ["arm_a"]


def test_a_joined_robot_that_sends_a_misfit_is_refused_once_and_not_rejoined(caplog: pytest.LogCaptureFixture) -> None:
    r = roster()
    r.update({"arm_b": robot("arm_b")}, 0.0)
    with caplog.at_level(logging.INFO, LOG.name):
        assert r.refuse("arm_b", Mismatch("state_dim", "18 entries, the policy needs 17"))
        assert not r.refuse("arm_b", Mismatch("state_dim", "again"))
    assert caplog.messages == [
        "refused robot arm_b: state_dim does not fit the policy (18 entries, the policy needs 17)"
    ]
    assert r.take_refused() == ["arm_b"] and r.take_refused() == []
    assert not r.serves("arm_b")
    assert r.update({"arm_b": robot("arm_b")}, 1.0).joined == []  # until its announcement goes and comes back
