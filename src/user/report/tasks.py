"""The tasks of a deployment side by side, whether each has a learner of its own or one learner trains one policy
on them all (its episodes split by task): each task's success and return over its recent online episodes against
wall time (one line per task, from its learner's start), and a row of figures per task, with the time its recent
success first reached the target (`SUCCESS_TARGET`, the issue's 80 %)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from user.learner.run_log import POOLED, CurveSeries
from user.report.overview import ReportData
from user.report.plots import nothing, png, pyplot

SUCCESS_TARGET = 0.8  # "time to 80 % success": the first online episode after which the recent window is this good
TASK_COLOURS = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:brown", "tab:olive"]


@dataclass(frozen=True)
class TaskFigures:
    """One task's row in the report."""

    task: str  # its learner's directory's name, or its name (one learner trained on several tasks)
    robots: str  # its robots, comma separated
    online_episodes: int
    demo_episodes: int
    recent_success: float | None  # over the latest window of online episodes at the end
    reached_s: float | None  # seconds from the learner's start to SUCCESS_TARGET recent success; None: not reached
    reached_episodes: int | None  # online episodes by then (the task's, all its robots'); None: not reached
    # transitions its learner received and its optimiser steps (its last progress row); None without progress
    # rows, and always for a task of one learner trained on several (its counts are not split by task: the
    # learner's totals are in the run's overview)
    env_steps: int | None
    gradient_steps: int | None


def pooled(data: ReportData) -> CurveSeries | None:
    """The task's recent-window series over all its robots; None without online episodes."""
    return next((s for s in data.curves.series if s.label == POOLED), None)


def reached(data: ReportData, target: float = SUCCESS_TARGET) -> tuple[float, int] | None:
    """(seconds from the learner's start, online episodes) at the first online episode after which the success of
    the recent window (once full: `curves.window` online episodes) is at least `target`; None when it never was."""
    series = pooled(data)
    if series is None:
        return None
    full = data.curves.window - 1
    for i, (at, rate) in enumerate(zip(series.at, series.success_rate, strict=True)):
        if i >= full and rate >= target:
            return at.elapsed_s, i + 1
    return None


def reached_s(data: ReportData, target: float = SUCCESS_TARGET) -> float | None:
    """Seconds from the learner's start to `target` recent success (`reached`); None when never."""
    found = reached(data, target)
    return None if found is None else found[0]


def task_figures(data: ReportData) -> TaskFigures:
    series = pooled(data)
    timing = data.timing
    return TaskFigures(
        task=data.name,
        robots=", ".join(r.robot_id for r in data.rates) or "-",
        online_episodes=sum(r.online_episodes for r in data.rates),
        demo_episodes=sum(r.demo_episodes for r in data.rates),
        recent_success=series.success_rate[-1] if series is not None else None,
        reached_s=reached_s(data),
        reached_episodes=None if (found := reached(data)) is None else found[1],
        env_steps=timing.env_steps[-1] if timing.env_steps else None,
        gradient_steps=timing.gradient_steps[-1] if timing.gradient_steps else None,
    )


def _draw(ax: Any, tasks: list[ReportData], success: bool, window: int) -> None:
    drawn = False
    for i, task in enumerate(tasks):
        series = pooled(task)
        if series is None:
            continue
        ys = series.success_rate if success else series.mean_return
        ax.plot([a.elapsed_s for a in series.at], ys, color=TASK_COLOURS[i % len(TASK_COLOURS)], label=task.name)
        drawn = True
    if not drawn:
        nothing(ax, "no online episodes")
        return
    if success:
        ax.axhline(SUCCESS_TARGET, color="dimgray", linestyle="--", linewidth=1.0, label=f"{SUCCESS_TARGET:.0%}")
        ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("wall time since the task's learner started (s)")
    ax.set_ylabel(f"{'success rate' if success else 'mean return'} (last {window} online ep.)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")


def tasks_png(data: ReportData) -> bytes:
    """Success rate (left) and mean return (right) of each task's recent online episodes against wall time."""
    window = data.tasks[0].curves.window if data.tasks else data.curves.window
    fig, axes = pyplot().subplots(1, 2, figsize=(13, 4.2))
    _draw(axes[0], data.tasks, True, window)
    _draw(axes[1], data.tasks, False, window)
    fig.tight_layout()
    return png(fig)
