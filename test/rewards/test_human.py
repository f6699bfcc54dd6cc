"""Human reward: presses attached to the step whose time window holds their stamp (synthetic stamps)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from user.rewards import HumanPress, HumanRewardAggregator, PressMode, RewardError, StepWindow

MS = 1_000_000


def windows(n: int, start: int = 0, period: int = 100 * MS) -> list[StepWindow]:
    return [StepWindow(i, start + i * period, start + (i + 1) * period) for i in range(n)]


def test_aggregator_waits_for_late_presses_then_settles() -> None:
    agg = HumanRewardAggregator("arm", latency_ns=50 * MS)
    w = windows(3)
    agg.close_step(w[0])
    agg.add_press(HumanPress(120 * MS, 1.0))  # pressed during step 1, before it closed: held as early
    agg.close_step(w[1])
    assert agg.settle(120 * MS) == []
    agg.add_press(HumanPress(50 * MS, 2.0))  # late for step 0, but step 0 is still held
    settled = agg.settle(160 * MS)
    assert [(r.step, r.reward) for r in settled] == [(0, 2.0)]
    agg.add_press(HumanPress(40 * MS, 3.0))  # step 0 already settled: too late
    assert agg.unmatched == 1
    agg.close_step(w[2])
    rest = agg.flush()
    assert [(r.step, r.reward) for r in rest] == [(1, 1.0), (2, 0.0)]


def test_presses_for_another_robot_are_dropped() -> None:
    agg = HumanRewardAggregator("arm")
    agg.close_step(windows(1)[0])
    agg.add_press(HumanPress(10 * MS, 1.0, robot_id="other"))
    agg.add_press(HumanPress(20 * MS, 1.0, robot_id=""))
    assert [r.reward for r in agg.flush()] == [1.0] and agg.unmatched == 1


def test_from_msg_and_bad_inputs() -> None:
    msg = SimpleNamespace(
        header=SimpleNamespace(stamp=SimpleNamespace(sec=2, nanosec=5)),
        robot_id="arm",
        source="pedal0",
        reward=1.0,
        mode=1,
        success=True,
    )
    press = HumanPress.from_msg(msg)
    assert press.stamp_ns == 2_000_000_005 and press.mode is PressMode.EPISODE_END and press.success
    with pytest.raises(RewardError, match="mode"):
        HumanPress.from_msg(SimpleNamespace(**{**vars(msg), "mode": 7}))
    with pytest.raises(RewardError):
        StepWindow(0, 5, 5)
    agg = HumanRewardAggregator()
    agg.close_step(StepWindow(0, 0, 10))
    with pytest.raises(RewardError, match="overlaps"):
        agg.close_step(StepWindow(1, 5, 20))
