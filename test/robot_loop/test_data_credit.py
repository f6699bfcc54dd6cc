"""The robot's credit gate: nothing waits before a learner paces; a spent credit holds steps until the next."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from user.robot_loop.data_credit import CreditGate


def test_without_any_credit_message_nothing_waits() -> None:
    gate = CreditGate()
    assert all(gate.take(0.0) for _ in range(1000))
    assert gate.held == 0


def test_a_spent_credit_holds_until_the_next_one() -> None:
    gate = CreditGate()
    gate.on_message(SimpleNamespace(credit=2))
    assert gate.take(0.0) and gate.take(0.0)
    assert not gate.take(0.0) and not gate.take(0.01)
    assert gate.held == 2 and gate.held_s > 0.0
    gate.note(1)  # a new credit counts from its arrival
    assert gate.take(0.0)
    assert not gate.take(0.0)
    gate.note(0)
    assert not gate.take(0.0)
    gate.note(-5)  # the robots are ahead: wait
    assert not gate.take(0.0)


def test_a_waiting_step_goes_on_when_credit_arrives() -> None:
    gate = CreditGate()
    gate.note(0)
    timer = threading.Timer(0.05, gate.note, args=(3,))
    timer.start()
    try:
        assert gate.take(30.0)  # woken by the new credit, long before the deadline
    finally:
        timer.cancel()
    assert gate.held == 1


def test_holds_are_counted_timed_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    ticks = iter(float(t) for t in range(100))
    gate = CreditGate(clock=lambda: next(ticks))
    assert gate.held == 0 and gate.held_s == 0.0
    gate.note(0)
    with caplog.at_level(logging.INFO, logger="user.robot_loop.data_credit"):
        assert not gate.take(0.0)  # clock 0 -> 1
        assert not gate.take(0.0)  # clock 2 -> 3
    assert gate.held == 2 and gate.held_s == 2.0
    assert [r.getMessage() for r in caplog.records] == [
        "ahead of the learner's update-to-data ratio: steps wait for its credit"
    ]
