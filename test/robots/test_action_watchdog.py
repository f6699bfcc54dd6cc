"""ActionWatchdog: fresh actions pass, stale ones (or none) mean hold."""

from __future__ import annotations

import numpy as np
import pytest

from user.robots.watchdog import ActionWatchdog


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_no_action_yet_means_hold() -> None:
    wd = ActionWatchdog(0.1, clock=FakeClock())
    assert wd.latest() is None
    assert wd.age() is None
    assert wd.stale_reason() == "no action received yet"


def test_an_action_is_fresh_up_to_the_deadline_then_stale() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(0.25, clock=clock)
    wd.feed(np.ones(7, np.float32))
    clock.t += 0.25
    fresh = wd.latest()
    assert fresh is not None and fresh.dtype == np.float32
    np.testing.assert_array_equal(fresh, np.ones(7))
    clock.t += 0.001
    assert wd.latest() is None
    assert wd.stale_reason() == "no fresh action for 251 ms (deadline 250 ms)"
    assert wd.latest(now=clock.t - 0.1) is not None  # an explicit `now` wins over the clock


def test_the_watchdog_keeps_its_own_copy() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(1.0, clock=clock)
    a = np.zeros(3)
    wd.feed(a)
    a[0] = 5.0
    got = wd.latest()
    assert got is not None and got[0] == 0.0
    got[1] = 7.0
    again = wd.latest()
    assert again is not None and again[1] == 0.0


def test_future_stamps_are_taken_as_now_and_old_ones_ignored() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(0.1, clock=clock)
    wd.feed(np.ones(2), received_at=clock.t + 60.0)  # a wrong stamp cannot keep an action alive
    assert wd.age() == 0.0
    clock.t += 0.2
    assert wd.latest() is None
    wd.feed(np.full(2, 2.0), received_at=clock.t)
    wd.feed(np.full(2, 3.0), received_at=clock.t - 0.05)  # arrived out of order: older, ignored
    latest = wd.latest()
    assert latest is not None and latest[0] == 2.0


def test_clear_forgets_the_action() -> None:
    wd = ActionWatchdog(1.0, clock=FakeClock())
    wd.feed(np.ones(2))
    wd.clear()
    assert wd.latest() is None


@pytest.mark.parametrize("deadline", [0.0, -1.0, float("nan"), float("inf")])
def test_the_deadline_must_be_positive_and_finite(deadline: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        ActionWatchdog(deadline)


def test_an_explicit_now_is_used_for_the_age_and_the_reason() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(0.1, clock=clock)
    wd.feed(np.ones(2))
    assert wd.age(now=clock.t + 0.5) == pytest.approx(0.5)
    assert wd.stale_reason(now=clock.t + 0.5) == "no fresh action for 500 ms (deadline 100 ms)"
    assert wd.age(now=clock.t - 1.0) == 0.0  # an earlier `now` is no negative age


def test_the_stale_reason_reports_long_stalls_in_milliseconds() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(2.0, clock=clock)
    wd.feed(np.ones(2))
    clock.t += 12.5
    assert wd.stale_reason() == "no fresh action for 12500 ms (deadline 2000 ms)"


def test_of_two_actions_with_the_same_stamp_the_later_one_wins() -> None:
    clock = FakeClock()  # a coarse clock: both arrive at the same reading
    wd = ActionWatchdog(0.1, clock=clock)
    wd.feed(np.full(2, 1.0))
    wd.feed(np.full(2, 2.0))
    latest = wd.latest()
    assert latest is not None and latest[0] == 2.0


def test_after_clear_the_watchdog_is_as_new_and_accepts_any_later_action() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(0.1, clock=clock)
    wd.feed(np.ones(2))
    wd.clear()
    assert wd.age() is None and wd.stale_reason() == "no action received yet"
    wd.feed(np.full(2, 4.0), received_at=clock.t - 0.05)  # older than the forgotten action: still taken
    latest = wd.latest()
    assert latest is not None and latest[0] == 4.0
    assert wd.age() == pytest.approx(0.05)


def test_the_watchdog_ages_actions_on_its_given_clock() -> None:
    clock = FakeClock()
    wd = ActionWatchdog(2.0, clock=clock)  # a control rate below 1 Hz: a 2 s deadline
    wd.feed(np.ones(2))
    clock.t += 2.0
    assert wd.latest() is not None
    clock.t += 0.01
    assert wd.latest() is None  # stale on the given clock, not the system's
