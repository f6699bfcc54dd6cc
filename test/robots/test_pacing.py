"""Real-time pacing to per-period deadlines, on a fake clock (no timing assertions on the real one)."""

from __future__ import annotations

from dataclasses import astuple

import pytest

from user.robots.pacing import HISTORY, DeadlinePacer, PacingStats


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


class ScriptedClock(FakeClock):
    """A fake clock whose sleeps end at given times (a scheduler waking early or late), then sleep exactly."""

    def __init__(self, start: float, wake_ups: list[float]) -> None:
        super().__init__()
        self.now = start
        self.wake_ups = list(wake_ups)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now = self.wake_ups.pop(0) if self.wake_ups else self.now + seconds


@pytest.mark.parametrize("period", [0.0, -0.1, float("nan"), float("inf"), float("-inf")])
def test_period_must_be_a_positive_finite_number(period: float) -> None:
    with pytest.raises(ValueError, match="period must be a positive number of seconds"):
        DeadlinePacer(period)


@pytest.mark.parametrize(
    ("wake_early", "fine_step"), [(0.1, 0.0002), (0.2, 0.0002), (-0.001, 0.0002), (0.002, 0.0), (0.002, -1.0)]
)
def test_wake_early_must_be_within_the_period_and_the_fine_step_positive(wake_early: float, fine_step: float) -> None:
    with pytest.raises(ValueError, match=r"^wake_early_s must be in \[0, period\) and fine_step_s positive$"):
        DeadlinePacer(0.1, wake_early_s=wake_early, fine_step_s=fine_step)


def test_wake_early_just_below_the_period_is_allowed() -> None:
    pacer = DeadlinePacer(0.1, wake_early_s=0.099, fine_step_s=1e-9)
    assert pacer.wake_early_s == 0.099 and pacer.fine_step_s == 1e-9


def test_by_default_the_last_two_milliseconds_are_napped_in_fifth_of_a_millisecond_steps() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep)
    pacer.restart()
    pacer.wait()
    coarse, *naps = clock.sleeps
    assert coarse == pytest.approx(0.098)
    assert len(naps) == 10 and all(n == pytest.approx(0.0002) for n in naps)
    assert clock.now == pytest.approx(100.1)


@pytest.mark.parametrize("work", [0.375, 0.4375])  # leaves exactly wake_early_s, or less, before the deadline
def test_when_no_more_than_wake_early_is_left_only_naps_are_taken(work: float) -> None:
    clock = FakeClock()  # binary-exact times: the comparison with wake_early_s is exact
    pacer = DeadlinePacer(0.5, clock, clock.sleep, wake_early_s=0.125, fine_step_s=0.0625)
    pacer.restart()
    clock.now += work
    pacer.wait()
    assert clock.sleeps == [0.0625] * round((0.5 - work) / 0.0625)  # no coarse sleep, no zero or negative one
    assert clock.now == 100.5 and pacer.stats().overruns == 0


def test_naps_are_bounded_when_the_sleep_function_does_not_advance_the_clock() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleeps.append, wake_early_s=0.002, fine_step_s=0.0002)
    pacer.wait()  # a broken sleep (or a frozen clock) must not spin forever
    assert len(clock.sleeps) == 1 + 10 + 2  # the coarse sleep, the naps that fill wake_early_s, two spare
    assert pacer.stats().max_ms == 0.0  # the clock says it never left the start


@pytest.mark.parametrize(
    ("woke_at", "extra_naps"),
    [(1.5e-6, 0), (1e-6, 1), (0.5e-6, 1)],  # closer to the deadline than 1 us counts as there
)
def test_a_wake_up_within_a_microsecond_of_the_deadline_counts_as_on_time(woke_at: float, extra_naps: int) -> None:
    clock = ScriptedClock(0.0, [woke_at])
    pacer = DeadlinePacer(2e-6, clock, clock.sleep, wake_early_s=0.0)
    pacer.restart()
    pacer.wait()
    assert len(clock.sleeps) == 1 + extra_naps


def test_lateness_percentiles_and_maximum() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(1.0, clock, clock.sleep, wake_early_s=0.0)
    for late_ms in range(100):  # lateness 0, 1, ..., 99 ms
        clock.oversleep = late_ms / 1e3
        pacer.wait()
    stats = pacer.stats()
    assert stats.periods == 100 and stats.overruns == 0
    assert stats.p50_ms == pytest.approx(49.5)
    assert stats.p99_ms == pytest.approx(98.01)
    assert stats.max_ms == pytest.approx(99.0)


def test_statistics_before_any_period_are_zero() -> None:
    assert DeadlinePacer(0.1).stats() == PacingStats(0, 0, 0.0, 0.0, 0.0)


def test_one_period_is_enough_for_statistics() -> None:
    clock = FakeClock()
    clock.oversleep = 0.003
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.0)
    pacer.wait()
    assert astuple(pacer.stats()) == (1, 0, pytest.approx(3.0), pytest.approx(3.0), pytest.approx(3.0))


def test_each_overrun_is_counted_with_how_late_it_was() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep)
    pacer.restart()
    clock.now += 0.35  # 250 ms over
    pacer.wait()
    clock.now += 0.15  # 50 ms over the restarted schedule
    pacer.wait()
    stats = pacer.stats()
    assert stats.overruns == 2 and stats.periods == 2
    assert stats.max_ms == pytest.approx(250.0) and stats.p50_ms == pytest.approx(150.0)
    assert clock.sleeps == []  # late loops do not sleep


def test_work_that_takes_the_whole_period_is_an_overrun() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.5, clock, clock.sleep)  # binary-exact: the deadline is reached exactly
    pacer.restart()
    clock.now += 0.5
    pacer.wait()
    assert clock.sleeps == [] and pacer.stats().overruns == 1
    clock.now += 0.25
    pacer.wait()  # the schedule restarted at the overrun: half a period left
    assert sum(clock.sleeps) == pytest.approx(0.25)


def test_clear_stats_starts_the_statistics_afresh() -> None:
    clock = FakeClock()
    clock.oversleep = 0.004
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.0)
    pacer.wait()
    clock.now += 1.0
    pacer.wait()  # an overrun
    assert pacer.stats().overruns == 1
    pacer.clear_stats()
    assert pacer.stats() == PacingStats(0, 0, 0.0, 0.0, 0.0)
    clock.oversleep = 0.0
    pacer.wait()
    assert pacer.stats().periods == 1 and pacer.stats().max_ms == pytest.approx(0.0, abs=1e-6)


def test_statistics_cover_the_most_recent_periods_only() -> None:
    clock = FakeClock()
    pacer = DeadlinePacer(0.1, clock, clock.sleep, wake_early_s=0.0)
    clock.oversleep = 0.05
    for _ in range(5):
        pacer.wait()
    clock.oversleep = 0.001
    for _ in range(HISTORY):
        pacer.wait()
    stats = pacer.stats()
    assert stats.periods == HISTORY  # bounded memory: the early slow periods are forgotten
    assert stats.max_ms == pytest.approx(1.0)
