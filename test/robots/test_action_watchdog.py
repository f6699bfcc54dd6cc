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


def test_for_control_rate_uses_one_period() -> None:
    assert ActionWatchdog.for_control_rate(20.0).deadline_s == pytest.approx(0.05)
    with pytest.raises(ValueError, match="control rate"):
        ActionWatchdog.for_control_rate(0.0)
