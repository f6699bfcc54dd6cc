"""`stop_after`: the first condition met ends the run, with a one-line reason; 0 turns a condition off."""

from __future__ import annotations

from user.learner.stop_after import StopAfter


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
