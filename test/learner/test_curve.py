"""learning_curve.png: the learner's gradient steps/s drawn at each progress row's env steps and time since the
run's start, and the run drawing its curve from its files (the curves themselves: test_run_log)."""

from __future__ import annotations

import threading
from pathlib import Path

from pytest import MonkeyPatch

from test.learner.test_progress import TRAINER, _feed, _outcome
from user.learner.checkpoint import LearnerCounters
from user.learner.curve import rate_points
from user.learner.progress import ProgressLog
from user.learner.run_log import CurvePoint, ProgressRow

RUN_START = 1000.0


def _progress(wall: float, env_steps: int, rate: float) -> ProgressRow:
    return ProgressRow(wall_time=wall, elapsed_s=wall - RUN_START, env_steps=env_steps, episodes=0, successes=0,
                       update_calls=0, gradient_steps=0, gradient_steps_per_s=rate, policy_version=0,
                       buffer_transitions=env_steps)  # fmt: skip


def test_the_rate_is_drawn_at_each_rows_env_steps_and_time_since_the_run_started() -> None:
    progress = [_progress(1002.5, 12, 3.0), _progress(1007.0, 30, 9.5)]
    assert rate_points(progress, RUN_START) == [CurvePoint(12, 2.5), CurvePoint(30, 7.0)]


def test_the_run_draws_its_curve_from_its_episodes(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    log.close()
    assert not (tmp_path / "learning_curve.png").exists()  # nothing to draw yet
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        _feed(log)
        out = log.plot()
    finally:
        log.close()
    assert out == tmp_path / "learning_curve.png" and out.stat().st_size > 0


def test_the_learners_rate_is_drawn_before_the_first_online_episode(tmp_path: Path) -> None:
    log = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        log.episode(_outcome("arm", 0, 99.0, is_demo=True), env_steps=10, wall=log.run_start + 1.0)
        assert log.plot() is None  # a demonstration only: nothing to draw
        log.write(log.run_start + 2.0, TRAINER, LearnerCounters(env_steps=10), 10, 3.0)
        out = log.plot()
    finally:
        log.close()
    assert out == tmp_path / "learning_curve.png" and out.stat().st_size > 0


def test_a_redraw_runs_on_its_own_thread_and_never_holds_the_writer(tmp_path: Path, monkeypatch: MonkeyPatch) -> None:
    """The stats timer writes the rows under the lock every callback of the learner node takes; a redraw there (2 s
    in a 16-robot fleet, bench/fleet.py) held every robot's transitions and receipts that long."""
    log = ProgressLog(tmp_path, plot_every_s=0.0)
    started, release = threading.Event(), threading.Event()
    drawn_on: list[str] = []

    def slow_plot() -> None:
        drawn_on.append(threading.current_thread().name)
        started.set()
        release.wait(10.0)

    monkeypatch.setattr(log, "plot", slow_plot)
    try:
        log.write(1001.0, TRAINER, LearnerCounters(env_steps=50, episodes=4), 50, 12.5)
        assert started.wait(10.0)  # the redraw began, and the write had returned before it ends
        assert drawn_on == ["progress-plot"] and not release.is_set()
    finally:
        release.set()
        log.close()
    assert drawn_on[-1] == threading.current_thread().name  # the final curve at close: drawn by the closer
