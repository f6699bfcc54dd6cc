"""The rate limiter: minimum size, samples per insert with slack, deadlines, never blocking inserts."""

import threading
import time

from user.buffer.rate_limiter import RateLimiter


def test_min_size_before_the_first_sample() -> None:
    limiter = RateLimiter(samples_per_insert=0.0, min_size=100)
    limiter.insert(99)
    assert not limiter.acquire(10, timeout_s=0.01)
    limiter.insert(1)
    assert limiter.acquire(10_000, timeout_s=0.0)  # no ratio: unlimited once the minimum is there


def test_samples_per_insert_holds_the_ratio() -> None:
    limiter = RateLimiter(samples_per_insert=4.0, min_size=10, error_buffer=8.0)
    limiter.insert(10)
    assert limiter.acquire(8, 0.0)  # the slack
    assert not limiter.acquire(8, 0.0)
    limiter.insert(2)  # 2 inserts buy 8 samples
    assert limiter.acquire(8, 0.0)
    assert not limiter.can_sample(1)
    for _ in range(100):
        limiter.insert(1)
        while limiter.acquire(4, 0.0):
            pass
    assert abs(limiter.samples - 4.0 * (limiter.inserts - 10)) <= 8.0


def test_a_waiting_sampler_wakes_on_insert() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=0, error_buffer=1.0)
    assert limiter.acquire(1, 0.0)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(limiter.acquire(1, timeout_s=5.0)))
    started = time.monotonic()
    waiter.start()
    limiter.insert(1)
    waiter.join(5.0)
    assert result == [True] and time.monotonic() - started < 1.0


def test_deadline_and_close() -> None:
    limiter = RateLimiter(samples_per_insert=1.0, min_size=5)
    started = time.monotonic()
    assert not limiter.acquire(1, timeout_s=0.1)
    assert 0.09 <= time.monotonic() - started < 1.0
    limiter.close()
    assert not limiter.acquire(1, timeout_s=5.0)  # at once


def test_state_dict_round_trip() -> None:
    a = RateLimiter(2.0, 3, 4.0)
    a.insert(10)
    a.acquire(5, 0.0)
    b = RateLimiter()
    b.load_state_dict(a.state_dict())
    assert (b.inserts, b.samples, b.samples_per_insert, b.min_size, b.error_buffer) == (10, 5, 2.0, 3, 4.0)
