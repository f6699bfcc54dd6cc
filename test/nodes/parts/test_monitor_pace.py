"""`PaceWatch`: the learner's gradient steps per transition over the latest window of transitions, judged only
once training had begun before the window, started afresh when the learner restarted; said on falling behind
and on catching up, with a gap between the two."""

from __future__ import annotations

import pytest

from user.nodes.parts.monitor_pace import PaceChange, PaceWatch


def test_the_ratio_is_over_the_latest_window_once_training_had_begun() -> None:
    watch = PaceWatch(window=100)
    watch.add(0, 0)
    watch.add(0, 100)  # warm-up: nothing trained yet
    watch.add(200, 150)
    assert watch.ratio() is None  # the window from 50 began before any training
    watch.add(400, 250)  # the window's start is the newest count at or before 150: (200, 150)
    assert watch.ratio() == (2.0, 100)
    for _ in range(5):
        watch.add(410, 250)  # no transition since: only the newest count is kept
    assert watch.ratio() == (2.1, 100) and len(watch._samples) == 2
    watch.add(300, 260)  # the learner restarted from an older checkpoint: a new window
    assert watch.ratio() is None
    with pytest.raises(ValueError, match="at least 1"):
        PaceWatch(window=0)


def test_behind_below_nine_tenths_caught_up_from_ninety_seven_hundredths() -> None:
    watch = PaceWatch(window=10)
    watch.add(100, 0)
    for ratio, change in [(3.7, None), (3.5, True), (3.8, None), (3.9, False), (3.7, None)]:
        steps, env = watch._samples[-1]
        watch.add(steps + round(ratio * 10), env + 10)
        said = watch.check(4.0)
        assert (None if said is None else said.behind) == change, ratio
    assert watch.check(0.0) is None  # no set ratio published (an older learner): nothing judged
    assert PaceChange(True, 1.69, 4.0, 512).text() == (
        "learner behind: 1.7 gradient steps per transition over the last 512 transitions, 4.0 set (42 %)"
    )
