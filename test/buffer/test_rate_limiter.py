"""The rate limiter: minimum size, samples per insert with slack, deadlines, never blocking inserts.

Blocking is checked with events and deadlines: a waiter must still be waiting before the insert (or close)
that releases it, and must be released well before its own deadline."""

import dataclasses
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from user.buffer.config import RateLimiterConfig
from user.buffer.rate_limiter import LimiterCounts, RateLimiter

STILL_WAITING_S = 0.2  # how long a waiter must stay blocked before the test releases it
RELEASED_WITHIN_S = 5.0  # deadline for a released waiter to return (its own timeout is far longer)
WAITER_TIMEOUT_S = 30.0


class _Waiter:
    """Runs `call` in a thread; `done` is set when it returns, `result` holds what it returned."""

    def __init__(self, call: Callable[[], bool]) -> None:
        self.done = threading.Event()
        self.result: bool | None = None

        def run() -> None:
            try:
                self.result = call()
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, daemon=True)


@contextmanager
def _waiting(limiter: RateLimiter, call: Callable[[], bool]) -> Iterator[_Waiter]:
    """A waiter that is blocked in `call` when the body starts; the limiter is closed on the way out."""
    waiter = _Waiter(call)
    waiter.thread.start()
    try:
        assert not waiter.done.wait(STILL_WAITING_S), "the call did not block"
        yield waiter
    finally:
        limiter.close()
        waiter.thread.join(RELEASED_WITHIN_S)


def test_min_size_before_the_first_sample() -> None:
    limiter = RateLimiter(samples_per_insert=0.0, min_size=100)
    limiter.insert(99)
    assert not limiter.acquire(10, timeout_s=0.01)
    limiter.insert(1)
    assert limiter.acquire(10_000, timeout_s=0.0)  # no ratio: unlimited once the minimum is there


def test_a_default_limiter_does_not_limit() -> None:
    limiter = RateLimiter()
    assert limiter.acquire(1_000_000, timeout_s=0.0)  # nothing stored yet, no ratio: sampling is free


def test_the_default_slack_is_the_configs() -> None:
    limiter = RateLimiter(samples_per_insert=1.0)
    slack = int(RateLimiterConfig().error_buffer)
    assert limiter.can_sample(slack) and not limiter.can_sample(slack + 1)


def test_from_config_takes_every_setting() -> None:
    limiter = RateLimiter.from_config(RateLimiterConfig(samples_per_insert=2.0, min_size=3, error_buffer=4.0))
    limiter.insert(2)
    assert not limiter.can_sample(1)  # below min_size
    limiter.insert()
    assert limiter.can_sample(4) and not limiter.can_sample(5)  # the slack only
    limiter.insert()
    assert limiter.can_sample(6) and not limiter.can_sample(7)  # one insert buys two samples


@pytest.mark.parametrize("spi", [0.25, 0.5, 1.0, 4.0])
def test_samples_per_insert_holds_the_ratio(spi: float) -> None:
    """Below one sample per insert as well as above: the learner never runs ahead of spi * inserts + slack."""
    limiter = RateLimiter(samples_per_insert=spi, min_size=10, error_buffer=2.0)
    limiter.insert(10)
    assert limiter.acquire(2, 0.0)  # the slack
    assert not limiter.acquire(1, 0.0)
    for _ in range(100):
        limiter.insert()  # one at a time: insert() counts one transition
        while limiter.acquire(1, 0.0):
            pass
        assert limiter.samples == math.floor(spi * (limiter.inserts - 10) + 2.0)
    assert limiter.inserts == 110
    assert limiter.ratio() == pytest.approx(limiter.samples / 110)


def test_a_batch_that_exactly_fills_the_budget_is_allowed() -> None:
    limiter = RateLimiter(samples_per_insert=4.0, min_size=10, error_buffer=8.0)
    limiter.insert(10)
    assert limiter.acquire(8, 0.0)  # the slack, to the last sample
    assert not limiter.acquire(8, 0.0)
    limiter.insert(2)  # 2 inserts buy 8 samples
    assert limiter.acquire(8, 0.0)
    assert not limiter.can_sample(1)


def test_counts_are_read_together_with_the_budget_the_ratio_gives() -> None:
    limiter = RateLimiter(samples_per_insert=2, min_size=3, error_buffer=4.0)
    assert limiter.counts() == LimiterCounts(inserted=0, sampled=0, samples_per_insert=2.0, min_size=3, budget=-6.0)
    limiter.insert(10)
    assert limiter.acquire(5, 0.0)
    counts = limiter.counts()
    assert counts == LimiterCounts(inserted=10, sampled=5, samples_per_insert=2.0, min_size=3, budget=14.0)
    assert isinstance(counts.samples_per_insert, float) and isinstance(counts.budget, float)
    assert limiter.budget() == 14.0  # without the error buffer: 14 + 4 - 5 more may be sampled
    assert limiter.can_sample(13) and not limiter.can_sample(14)
    with pytest.raises(dataclasses.FrozenInstanceError):
        counts.sampled = 0  # type: ignore[misc]
    limiter.load_state_dict({"inserts": 20, "samples": 7})
    assert (limiter.counts().inserted, limiter.counts().sampled, limiter.budget()) == (20, 7, 34.0)


def test_without_a_ratio_the_budget_is_nothing_and_sampling_is_free() -> None:
    limiter = RateLimiter(samples_per_insert=0.0, min_size=5)
    limiter.insert(8)
    assert limiter.budget() == 0.0 and limiter.counts().budget == 0.0
    assert limiter.can_sample(1_000_000)


def test_ratio_is_samples_per_insert_so_far() -> None:
    limiter = RateLimiter()
    assert limiter.ratio() == 0.0  # nothing inserted: no division by zero
    limiter.insert(4)
    assert limiter.acquire(6, 0.0)
    assert limiter.ratio() == 1.5


def test_acquire_blocks_until_an_insert_makes_room() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=0, error_buffer=1.0)
    assert limiter.acquire(1, 0.0)
    with _waiting(limiter, lambda: limiter.acquire(1, timeout_s=WAITER_TIMEOUT_S)) as waiter:
        assert limiter.samples == 1  # the blocked waiter has not counted its batch
        limiter.insert(1)
        assert waiter.done.wait(RELEASED_WITHIN_S), "the insert did not wake the waiting sampler"
    assert waiter.result is True and limiter.samples == 2


def test_acquire_below_min_size_blocks_until_the_minimum_is_stored() -> None:
    limiter = RateLimiter(samples_per_insert=0.0, min_size=5)
    limiter.insert(4)
    with _waiting(limiter, lambda: limiter.acquire(3, timeout_s=WAITER_TIMEOUT_S)) as waiter:
        limiter.insert(1)
        assert waiter.done.wait(RELEASED_WITHIN_S)
    assert waiter.result is True


def test_close_wakes_a_blocked_acquire_and_refuses_later_ones() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=5)
    with _waiting(limiter, lambda: limiter.acquire(1, timeout_s=WAITER_TIMEOUT_S)) as waiter:
        limiter.close()
        assert waiter.done.wait(RELEASED_WITHIN_S), "close() did not wake the waiting sampler"
    assert waiter.result is False
    limiter.insert(100)
    assert limiter.can_sample(1)  # the budget is there ...
    assert not limiter.acquire(1, timeout_s=0.0)  # ... but a closed limiter hands out nothing
    assert limiter.samples == 0


def test_acquire_gives_up_at_its_deadline_without_counting() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=5)
    assert not limiter.acquire(1, timeout_s=0.05)
    assert not limiter.acquire(1, timeout_s=-1.0)  # a deadline already past
    assert limiter.samples == 0


def test_wait_for_insert_wakes_on_insert() -> None:
    limiter = RateLimiter()
    limiter.insert(3)  # what was inserted before the wait does not count
    with _waiting(limiter, lambda: limiter.wait_for_insert(WAITER_TIMEOUT_S)) as waiter:
        limiter.insert(1)
        assert waiter.done.wait(RELEASED_WITHIN_S), "the insert did not wake the waiter"
    assert waiter.result is True


def test_wait_for_insert_wakes_on_close() -> None:
    limiter = RateLimiter()
    with _waiting(limiter, lambda: limiter.wait_for_insert(WAITER_TIMEOUT_S)) as waiter:
        limiter.close()
        assert waiter.done.wait(RELEASED_WITHIN_S), "close() did not wake the waiter"
    assert waiter.result is True


def test_wait_for_insert_is_false_at_its_deadline() -> None:
    limiter = RateLimiter()
    limiter.insert(1)
    assert limiter.wait_for_insert(0.05) is False
    assert limiter.wait_for_insert(-1.0) is False


def test_state_dict_round_trip() -> None:
    a = RateLimiter(2.0, 3, 4.0)
    a.insert(10)
    a.acquire(5, 0.0)
    b = RateLimiter()
    b.load_state_dict(a.state_dict())
    assert (b.inserts, b.samples, b.samples_per_insert, b.min_size, b.error_buffer) == (10, 5, 2.0, 3, 4.0)
    assert b.can_sample(13) and not b.can_sample(14)  # the resumed limiter holds the saved budget


def test_a_state_with_counts_only_keeps_the_limiters_own_settings() -> None:
    limiter = RateLimiter(samples_per_insert=2.0, min_size=3, error_buffer=4.0)
    limiter.load_state_dict({"inserts": 10, "samples": 5})
    assert (limiter.samples_per_insert, limiter.min_size, limiter.error_buffer) == (2.0, 3, 4.0)
    assert limiter.can_sample(13) and not limiter.can_sample(14)


def test_loading_a_state_wakes_a_waiter_it_lets_through() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=5)
    with _waiting(limiter, lambda: limiter.acquire(1, timeout_s=WAITER_TIMEOUT_S)) as waiter:
        limiter.load_state_dict({"inserts": 10, "samples": 0})
        assert waiter.done.wait(RELEASED_WITHIN_S)
    assert waiter.result is True
