"""`stop_after`: the first condition met ends the run, with a one-line reason; 0 turns a condition off."""

from __future__ import annotations

from user.buffer.rate_limiter import RateLimiter
from user.learner.stop_after import RunEnding, StopAfter


def test_nothing_set_never_ends_the_run() -> None:
    never = StopAfter()
    assert not never.active
    assert never.reached(10**9, 10**6, 1e9, success=1.0, window=1000) is None


def test_each_condition_ends_the_run_once_reached() -> None:
    assert StopAfter(env_steps=100).reached(99, 0, 0.0) is None
    assert StopAfter(env_steps=100).reached(100, 0, 0.0) == "100 transitions received (stop_after.env_steps 100)"
    assert StopAfter(episodes=5).reached(0, 4, 0.0) is None
    assert StopAfter(episodes=5).reached(0, 5, 0.0) == "5 episodes stored (stop_after.episodes 5)"
    assert StopAfter(wall_time_s=60.0).reached(0, 0, 59.9) is None
    assert StopAfter(wall_time_s=60.0).reached(0, 0, 60.0) == "60 s since the start (stop_after.wall_time_s 60)"
    assert StopAfter(wall_time_s=60.0).reached(0, 0, 61.0) == "61 s since the start (stop_after.wall_time_s 60)"


def test_the_success_rate_counts_only_over_enough_online_episodes() -> None:
    stop = StopAfter(success_rate=0.9, success_episodes=20)
    assert stop.active
    assert stop.reached(0, 0, 0.0, success=None, window=0) is None
    assert StopAfter(success_rate=0.5, success_episodes=1).reached(0, 0, 0.0, success=1.0) is None  # no window
    assert stop.reached(0, 0, 0.0, success=1.0, window=19) is None  # too few episodes to judge
    assert stop.reached(0, 0, 0.0, success=0.85, window=20) is None
    assert stop.reached(0, 0, 0.0, success=0.9, window=20) == (
        "success rate 90% over the last 20 online episodes (stop_after.success_rate 0.9)"
    )


def _limiter(spi: float, min_size: int, inserts: int, samples: int) -> RateLimiter:
    limiter = RateLimiter(samples_per_insert=spi, min_size=min_size, error_buffer=256.0)
    limiter.insert(inserts)
    limiter.samples = samples
    return limiter


def test_the_run_ends_once_the_update_calls_owed_then_are_done() -> None:
    """What the ratio allows for the transitions inserted when the condition was met (no error buffer) is owed;
    later inserts owe nothing."""
    limiter = _limiter(spi=256.0, min_size=10, inserts=20, samples=512)
    ending = RunEnding.begin("why", limiter, now=100.0, catch_up_s=30.0)
    assert (ending.why, ending.target, ending.deadline) == ("why", 2560.0, 130.0)
    assert ending.owed(limiter, batch_size=256) == 8
    assert ending.owed(limiter, batch_size=100) == 21  # a part batch counts as a call
    assert ending.owed(limiter, batch_size=1) == 2048
    assert not ending.due(limiter, now=129.9)
    limiter.insert(50)
    limiter.samples = 2559
    assert ending.owed(limiter, batch_size=256) == 1 and not ending.due(limiter, now=100.0)
    limiter.samples = 2560
    assert ending.owed(limiter, batch_size=256) == 0 and ending.due(limiter, now=100.0)


def test_the_run_ends_at_the_deadline_whatever_is_owed() -> None:
    limiter = _limiter(spi=256.0, min_size=0, inserts=100, samples=0)
    ending = RunEnding.begin("why", limiter, now=5.0, catch_up_s=2.0)
    assert not ending.due(limiter, now=6.99)
    assert ending.due(limiter, now=7.0)
    assert RunEnding.begin("why", limiter, now=5.0, catch_up_s=0.0).due(limiter, now=5.0)


def test_nothing_is_owed_without_a_ratio_or_before_the_first_batch_was_allowed() -> None:
    sync = _limiter(spi=0.0, min_size=0, inserts=100, samples=300)  # sync mode: phases sized per episode
    assert RunEnding.begin("why", sync, now=0.0, catch_up_s=60.0).due(sync, now=0.0)
    early = _limiter(spi=256.0, min_size=1000, inserts=999, samples=0)  # still warming up
    ending = RunEnding.begin("why", early, now=0.0, catch_up_s=60.0)
    assert ending.owed(early, batch_size=256) == 0 and ending.due(early, now=0.0)
    at_start = _limiter(spi=256.0, min_size=1000, inserts=1000, samples=0)
    assert RunEnding.begin("why", at_start, now=0.0, catch_up_s=60.0).due(at_start, now=0.0)
