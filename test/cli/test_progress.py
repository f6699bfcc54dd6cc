"""`user.cli.progress`: a bar redrawn in place on a terminal, plain lines at an interval otherwise (a fake clock)."""

from __future__ import annotations

import io

import pytest

from user.cli.progress import Phases, Progress, duration_text


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_come_at_the_interval_with_count_rate_and_eta() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("storing episodes", 100, "episodes", stream=out, clock=clock, line_every_s=5.0)
    clock.now += 1.0
    progress.update(10)
    assert out.getvalue() == ""  # not yet 5 s
    clock.now += 4.0
    progress.update(50)
    assert out.getvalue() == "storing episodes [############------------] 50/100 episodes 10.0/s ETA 0:05\n"
    clock.now += 5.0
    progress.update(100)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[-1] == "storing episodes: 100 episodes in 0:10 (10.0/s)"
    assert len(lines) == 3


def test_without_a_total_there_is_no_bar_and_no_eta() -> None:
    clock, out = Clock(), io.StringIO()
    progress = Progress("reading bag messages", stream=out, clock=clock, line_every_s=1.0)
    clock.now += 2.0
    progress.update(30)
    assert out.getvalue() == "reading bag messages 30 15.0/s\n"


def test_on_a_terminal_the_bar_is_redrawn_in_place() -> None:
    clock, out = Clock(), Terminal()
    progress = Progress("exporting episodes", 4, stream=out, clock=clock)
    for done in range(1, 5):
        clock.now += 1.0
        progress.update(done)
    progress.close()
    text = out.getvalue()
    assert text.count("\r") == 5 and text.count("\n") == 1 and text.endswith("\n")
    assert "\rexporting episodes [" + "#" * 12 + "-" * 12 + "] 2/4 1.0/s ETA 0:02\x1b[K" in text


def test_phases_close_each_step_when_the_next_begins() -> None:
    clock, out = Clock(), io.StringIO()
    with Phases(stream=out, clock=clock, line_every_s=1000.0) as phases:
        phases("reading bag messages", 7, None)
        clock.now += 1.0
        phases("storing episodes", 0, 2)
        phases("storing episodes", 2, 2)
    assert out.getvalue().splitlines() == [
        "reading bag messages: 7 in 0:01 (7.0/s)",
        "storing episodes: 2 in 0:00 (0.0/s)",
    ]


def test_a_step_cut_short_by_an_error_gets_no_summary() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), Phases(stream=out) as phases:
        phases("storing episodes", 1, 3)
        raise RuntimeError("disk full")
    assert "storing episodes:" not in out.getvalue()


@pytest.mark.parametrize(("seconds", "text"), [(7.2, "0:07"), (723, "12:03"), (3723, "1:02:03")])
def test_durations(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
