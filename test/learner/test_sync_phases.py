"""Sync mode's training phases: sized by the update-to-data ratio with fractions carried over, run one at a time
in the order their episodes were stored, on a thread that ends when the session stops."""

from __future__ import annotations

import threading

import pytest

from test.conftest import wait_until
from user.learner.sync_phases import Episode, SyncPhases, SyncSchedule

pytestmark = pytest.mark.timeout(30)


def test_the_sync_schedule_carries_fractions_of_update_calls_over() -> None:
    schedule = SyncSchedule(updates_per_step=0.3, gradient_steps_per_update=2)  # 0.15 calls per step
    assert [schedule.calls_for(10) for _ in range(4)] == [1, 2, 1, 2]  # 1.5, 3.0, 4.5, 6.0 calls in all
    assert schedule.owed == pytest.approx(0.0, abs=1e-9)


def test_phases_run_one_at_a_time_in_order_until_stopped() -> None:
    ran: list[tuple[int, Episode]] = []
    started, release = threading.Event(), threading.Event()

    def phase(steps: int, episode: Episode) -> None:
        started.set()
        release.wait(10.0)  # the first phase holds the thread: the second waits in the queue
        ran.append((steps, episode))

    stop = threading.Event()
    phases = SyncPhases(phase, stop)
    phases.put(3, ("a", 0))
    phases.put(5, ("b", 7))
    phases.start()
    assert started.wait(5.0)
    assert phases.waiting() and ran == []
    release.set()
    assert wait_until(lambda: len(ran) == 2, 5.0)
    assert ran == [(3, ("a", 0)), (5, ("b", 7))] and not phases.waiting()
    stop.set()
    phases.join(5.0)
    phases.put(1, ("a", 1))  # stopped: nothing runs any more
    assert phases.waiting() and len(ran) == 2
