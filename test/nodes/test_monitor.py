"""The monitor's learner rate is taken over its own period, not from the latest one-second stats message."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from user.bus.zenoh_bus import ZenohBus
from user.nodes.monitor import MonitorNode


def test_learner_rate_is_measured_between_lines(make_bus: Callable[..., ZenohBus]) -> None:
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm"], "period_s": 60.0}))
    try:
        stats = {"updates": 100.0, "updates_per_second": 7.0, "policy_version": 3.0, "buffer": 10.0}
        monitor.stats = dict(stats)
        assert "learner: 7.0 steps/s" in monitor.line()  # first line: the message's own rate
        time.sleep(0.5)
        # a rate-limited learner between bursts: its latest message says 0 steps/s, yet 50 steps were made
        monitor.stats = {**stats, "updates": 150.0, "updates_per_second": 0.0}
        rate = float(monitor.line().split("learner: ")[1].split(" steps/s")[0])
        assert rate == pytest.approx(100.0, rel=0.3)
    finally:
        monitor.destroy()
