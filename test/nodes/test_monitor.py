"""The monitor's line: how each robot's latest online episodes went (return, length, success, interventions)
and all robots' together, and the learner's env steps and gradient steps named apart; the learner rate is
taken over the monitor's own period, not from the latest one-second stats message."""

from __future__ import annotations

from collections.abc import Callable

from user.bus.zenoh_bus import ZenohBus
from user.interfaces.codec import default_codec
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg
from user.nodes.monitor import MonitorNode

CODEC = default_codec()
STATS = {
    "updates": 100.0,
    "updates_per_second": 7.0,
    "policy_version": 3.0,
    "buffer": 10.0,
    "env_steps": 640.0,
    "idle_fraction": 0.5,
    "buffer_wait_fraction": 0.25,
}


def _end(
    robot: str, ret: float, *, version: int = 2, steps: int = 200, success: bool = False, interventions: int = 0
) -> object:
    event = EpisodeEvent(
        robot, "pendulum", 0, EpisodeKind.END, 1, success, steps, ret, interventions, policy_version=version
    )
    return episode_event_to_msg(event, CODEC)


def test_the_line_shows_returns_per_robot_and_for_all_robots(make_bus: Callable[..., ZenohBus]) -> None:
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm", "cart"], "period_s": 60.0, "window": 2}))
    try:
        assert monitor.line().startswith("arm: 0 ep + 0 demo, no online episode yet, v0 | cart: 0 ep + 0 demo")
        monitor._on_event(_end("arm", 99.0, version=0))  # no learned policy acted: a demo, not averaged
        for ret in (-300.0, -200.0, -100.0):  # a window of 2: the first leaves it
            monitor._on_event(_end("arm", ret, version=4))
        monitor._on_event(_end("cart", 5.0, steps=50, success=True, interventions=10))
        monitor.stats = dict(STATS)
        arm, cart, pooled, learner = monitor.line().split(" | ")
    finally:
        monitor.destroy()
    assert arm == (
        "arm: 3 ep + 1 demo, last 2: return -150.0 (last -100.0), length 200, success 0%, interventions 0.0/ep, v4"
    )
    assert (
        cart == "cart: 1 ep + 0 demo, last 1: return 5.0 (last 5.0), length 50, success 100%, interventions 10.0/ep, v2"
    )
    assert pooled == (
        "all robots: 4 ep, last 2: return -47.5 (last 5.0), length 125, success 50%, interventions 5.0/ep"
    )
    assert learner == (
        "learner: 640 env steps, 7.0 grad steps/s, 100 grad steps, policy v3, buffer 10, idle 50% (batch feed 25%)"
    )


def test_learner_rate_is_measured_between_lines(make_bus: Callable[..., ZenohBus]) -> None:
    clock = [100.0]
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm"], "period_s": 60.0}))
    monitor.clock = lambda: clock[0]
    try:
        monitor.stats = dict(STATS)
        assert "learner: 640 env steps, 7.0 grad steps/s" in monitor.line()  # first line: the message's own rate
        clock[0] += 0.5
        # a rate-limited learner between bursts: its latest message says 0 steps/s, yet 50 steps were made
        monitor.stats = {**STATS, "updates": 150.0, "updates_per_second": 0.0}
        assert "learner: 640 env steps, 100.0 grad steps/s, 150 grad steps" in monitor.line()
    finally:
        monitor.destroy()
