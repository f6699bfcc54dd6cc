"""Real-time pacing to per-period deadlines, on a fake clock (no timing assertions on the real one)."""

from __future__ import annotations

import pytest

from user.robots.pacing import DeadlinePacer


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.oversleep = 0.0  # added to every sleep, like a busy scheduler
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds + self.oversleep


def test_sleeps_to_each_deadline() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep)
    pacer.restart()  # the schedule starts now, so the first period includes its work
    for _ in range(3):
        clock.now += 0.03  # work
        pacer.wait()
    assert sum(clock.sleeps) == pytest.approx(0.21)  # 3 x 70 ms: coarse sleeps, then short naps
    assert max(clock.sleeps) == pytest.approx(0.068)  # woke 2 ms early
    assert clock.now == pytest.approx(100.3)
    assert pacer.stats().max_ms == pytest.approx(0.0, abs=1e-6)


def test_waking_early_absorbs_a_late_wake_up() -> None:
    clock = FakeClock()
    clock.oversleep = 0.0015  # the scheduler wakes us 1.5 ms late, every time
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.002)
    other = FakeClock()
    other.oversleep = 0.0015
    single = DeadlinePacer(0.1, other, other.sleep, wake_early_s=0.0)
    for _ in range(10):
        pacer.wait()
        single.wait()
    assert single.stats().max_ms == pytest.approx(1.5)
    assert pacer.stats().max_ms < 1.5  # the coarse sleep's lateness is absorbed; only the last nap's remains


def test_single_sleep_when_not_waking_early() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.0)
    pacer.restart()
    clock.now += 0.03
    pacer.wait()
    assert clock.sleeps == pytest.approx([0.07])


def test_lateness_is_measured() -> None:
    clock = FakeClock()
    clock.oversleep = 0.002
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.0)
    for _ in range(10):
        pacer.wait()
    stats = pacer.stats()
    assert stats.periods == 10 and stats.overruns == 0
    assert stats.p50_ms == pytest.approx(2.0) and stats.max_ms == pytest.approx(2.0)


def test_overrun_restarts_the_schedule_without_a_burst() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep)
    pacer.wait()
    clock.now += 0.35  # a very slow period
    pacer.wait()
    assert pacer.stats().overruns == 1
    clock.sleeps.clear()
    clock.now += 0.01
    pacer.wait()
    assert sum(clock.sleeps) == pytest.approx(0.09)  # a full period from the overrun, not a catch-up


def test_never_sleeps_longer_than_a_period() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep)
    pacer.wait()
    clock.sleeps.clear()
    clock.now -= 5.0  # a clock that jumped back must not cause a long sleep
    pacer.wait()
    assert sum(clock.sleeps) <= 0.1 + 1e-9


def test_period_must_be_positive() -> None:
    with pytest.raises(ValueError):
        DeadlinePacer(0.0)
    with pytest.raises(ValueError):
        DeadlinePacer(0.1, wake_early_s=0.2)
