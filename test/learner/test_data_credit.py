"""The learner's data credit: what it trained for at its ratio since it started, less what it received since, plus
the tolerance; the warm-up still owed counts, data stored before the start does not; while the learner waits for
stored data, transitions of episodes still running do not count (no side waits for the other for ever)."""

from __future__ import annotations

import pytest

from user.buffer.rate_limiter import RateLimiter
from user.learner.data_credit import DataCredit


def test_the_credit_follows_samples_at_the_ratio_and_transitions_received() -> None:
    limiter = RateLimiter(samples_per_insert=4.0, min_size=10, error_buffer=8.0)
    credit = DataCredit(limiter, tolerance=5, batch_rows=4, received=0)
    limiter.insert(10)
    assert credit.credit(received=10) == 5  # the warm-up is here; no sample yet
    assert limiter.acquire(8, 0.0)  # 8 rows = 2 transitions' worth at 4 per insert
    assert credit.credit(received=10) == 5 + 2
    limiter.insert(9)
    assert credit.credit(received=19) == 7 - 9  # ahead by 2: robots that can wait wait
    assert credit.credit(received=25) == 7 - 15  # received, not yet stored (an episode running): counted
    assert limiter.acquire(6, 0.0)  # 14 rows in all: 3.5 transitions' worth, rounded down
    assert credit.credit(received=25) == 5 + 3 - 15


def test_while_the_learner_waits_for_stored_data_running_episodes_do_not_count() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=10, error_buffer=2.0)
    credit = DataCredit(limiter, tolerance=3, batch_rows=4, received=0)
    assert credit.credit(received=0) == 3 + 10  # the warm-up and the tolerance
    assert credit.credit(received=40) == 13  # warm-up not stored yet (one long episode running): go on
    limiter.insert(12)
    assert credit.credit(received=40) == 13 - 40  # the learner can sample now: received counts
    assert limiter.acquire(4, 0.0)  # 4 <= 1 x (12 - 10) + 2, and then no more
    assert not limiter.can_sample(4)
    assert credit.credit(received=40) == 13 + 4 - 12  # it waits for data: what is stored counts


def test_data_stored_before_the_start_is_neither_owed_nor_counted() -> None:
    limiter = RateLimiter(samples_per_insert=2.0, min_size=10, error_buffer=4.0)
    limiter.insert(1000)  # a resumed run or imported demonstrations
    assert limiter.acquire(4, 0.0)
    credit = DataCredit(limiter, tolerance=3, batch_rows=2, received=500)
    assert credit.credit(received=500) == 3
    limiter.insert(2)
    assert credit.credit(received=502) == 1
    assert limiter.acquire(8, 0.0)
    assert credit.credit(received=502) == 5


def test_while_a_resumed_learner_waits_only_what_was_stored_since_its_start_counts() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=10, error_buffer=2.0)
    limiter.insert(100)  # a resumed run
    assert limiter.acquire(92, 0.0)  # 1 x (100 - 10) + 2: nothing more until more is stored
    credit = DataCredit(limiter, tolerance=3, batch_rows=4, received=100)
    assert not limiter.can_sample(4)
    assert credit.credit(received=130) == 3  # it waits for data: nothing stored since the start, 30 running
    limiter.insert(2)
    assert not limiter.can_sample(4)
    assert credit.credit(received=130) == 3 - 2


def test_without_a_ratio_there_is_no_credit_and_a_bad_tolerance_is_refused() -> None:
    assert DataCredit(RateLimiter(samples_per_insert=0.0), tolerance=1, batch_rows=1, received=0).credit(5) is None
    with pytest.raises(ValueError, match="at least 1"):
        DataCredit(RateLimiter(samples_per_insert=1.0), tolerance=0, batch_rows=1, received=0)
