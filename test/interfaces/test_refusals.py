"""Refusals are all counted, and each cause is logged at once, then at most once a period with the count since."""

from __future__ import annotations

import logging
import threading

import pytest

from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError

LOG = logging.getLogger("test.refusals")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOG.name]


def test_each_cause_is_logged_at_once_then_once_a_period_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = Refusals(LOG, period_s=10.0, clock=clock)
    refusals.refuse("reward is not finite", "transition 1: reward is not finite (nan)")
    refusals.refuse("reward is not finite", "transition 2: reward is not finite (nan)")
    refusals.refuse("state is not finite", "transition 3: state is not finite")
    clock.now += 9.5
    refusals.refuse("reward is not finite", "transition 4: reward is not finite (inf)")
    assert _lines(caplog) == [
        (logging.ERROR, "refused transition 1: reward is not finite (nan)"),
        (logging.ERROR, "refused transition 3: state is not finite"),
    ]
    clock.now += 0.5  # a whole period after the cause's last line
    refusals.refuse("reward is not finite", "transition 5: reward is not finite (nan)")
    assert _lines(caplog)[-1] == (
        logging.ERROR,
        "refused transition 5: reward is not finite (nan) (2 more refused for this cause since its last report)",
    )
    clock.now += 10.0
    refusals.refuse("reward is not finite", "transition 6: reward is not finite (nan)")
    assert _lines(caplog)[-1] == (logging.ERROR, "refused transition 6: reward is not finite (nan)")
    assert refusals.counts == {"reward is not finite": 5, "state is not finite": 1}
    assert refusals.total == 6 and refusals.count("reward is not finite") == 5 and refusals.count("other") == 0


def test_an_invalid_message_is_refused_under_its_cause_at_the_chosen_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refusals = Refusals(LOG, level=logging.WARNING)
    refusals.invalid("press from 'pedal0'", InvalidMessageError("press.reward", "is not finite", "nan"))
    refusals.invalid("press from 'pedal1'", InvalidMessageError("press.mode", "is unknown", "5"), logging.INFO)
    assert refusals.counts == {"press.reward is not finite": 1, "press.mode is unknown": 1}
    assert _lines(caplog) == [
        (logging.WARNING, "refused press from 'pedal0': press.reward is not finite (nan)"),
        (logging.INFO, "refused press from 'pedal1': press.mode is unknown (5)"),
    ]


def test_refusals_from_several_threads_are_all_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    refusals = Refusals(LOG, period_s=3600.0)

    def flood() -> None:
        for _ in range(500):
            refusals.refuse("x", "a message")

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30.0)
    assert refusals.total == 2000 and len(_lines(caplog)) == 1
