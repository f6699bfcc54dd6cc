"""The HTML page's figures, one PNG per section that has something to draw (a section without data has none:
the page says what is missing instead)."""

from __future__ import annotations

from user.report.overview import TREND_EPISODES, ReportData
from user.report.plots import (
    Axis,
    draw_buffer,
    draw_curve,
    draw_idle,
    draw_interventions,
    draw_rate,
    draw_rates,
    draw_versions,
    png,
    pyplot,
)
from user.report.tasks import tasks_png

CURVES = "curves"
ROBOTS = "robots"
TIMING = "timing"
BUFFER = "buffer"
TASKS = "tasks"


def curves_png(data: ReportData) -> bytes:
    """Return and success rate (rows) against environment steps and wall time (columns)."""
    fig, axes = pyplot().subplots(2, 2, figsize=(12, 7), sharey="row")
    axes_x: tuple[Axis, Axis] = ("steps", "seconds")
    for col, axis in enumerate(axes_x):
        draw_curve(axes[0, col], data.curves, "return", axis)
        draw_curve(axes[1, col], data.curves, "success", axis)
    axes[0, 0].legend(fontsize="small", loc="best")
    fig.tight_layout()
    return png(fig)


def robots_png(data: ReportData) -> bytes:
    """Success and intervention rates per robot (left), intervened steps of each online episode (right)."""
    width = max(5.0, 1.6 * len(data.rates) + 2)
    fig, axes = pyplot().subplots(1, 2, figsize=(width + 7.0, 3.6), width_ratios=(width, 7.0))
    draw_rates(axes[0], data.rates)
    draw_interventions(axes[1], data.interventions, TREND_EPISODES)
    fig.tight_layout()
    return png(fig)


def timing_png(data: ReportData) -> bytes:
    """Gradient steps per second, idle fraction and policy version against wall time."""
    fig, axes = pyplot().subplots(3, 1, figsize=(12, 7), sharex=True)
    draw_rate(axes[0], data.timing)
    draw_idle(axes[1], data.timing)
    draw_versions(axes[2], data.timing)
    fig.tight_layout()
    return png(fig)


def buffer_png(data: ReportData) -> bytes:
    robots = len(data.run.buffer.robots) if data.run.buffer else 0
    fig, ax = pyplot().subplots(figsize=(max(5.0, 1.6 * robots + 2), 3.6))
    draw_buffer(ax, data.run.buffer)
    fig.tight_layout()
    return png(fig)


def section_figures(data: ReportData) -> dict[str, bytes]:
    """Section name -> its PNG, for the sections with data. PlotsUnavailableError without matplotlib."""
    figures: dict[str, bytes] = {}
    if data.tasks:
        figures[TASKS] = tasks_png(data)
    if data.curves.series:
        figures[CURVES] = curves_png(data)
    if any(r.online_episodes for r in data.rates):
        figures[ROBOTS] = robots_png(data)
    if data.timing.seconds:
        figures[TIMING] = timing_png(data)
    if data.run.buffer is not None and data.run.buffer.robots:
        figures[BUFFER] = buffer_png(data)
    return figures
