"""The monitor's words: counts written short, times as local HH:MM:SS (the lines themselves are tested with the
node, in test_monitor)."""

from __future__ import annotations

import time

from user.nodes.parts.monitor_text import amount, clock_time, plural


def test_counts_are_written_short_and_named_in_the_plural_unless_one() -> None:
    assert [amount(n) for n in (0, 640, 9999, 12_400, 999_949, 3_214_000)] == [
        "0",
        "640",
        "9999",
        "12.4k",
        "999.9k",
        "3.21M",
    ]
    assert (plural(1, "demo"), plural(0, "demo"), plural(12_400, "transition")) == (
        "1 demo",
        "0 demos",
        "12.4k transitions",
    )


def test_times_are_local_hours_minutes_seconds() -> None:
    wall = 1_700_000_000.9
    assert clock_time(wall) == time.strftime("%H:%M:%S", time.localtime(wall))
    assert len(clock_time(wall)) == 8
