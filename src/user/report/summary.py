"""report.png: the run at a glance in one image: its key figures, then return and success against environment
steps, success against wall time, per-robot success and intervention rates, the learner's rate and idle fraction,
and the buffer's composition. Panels without data say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from user.report.overview import ReportData, key_figures
from user.report.plots import draw_buffer, draw_curve, draw_rates, nothing, png, pyplot

SIZE_IN = (16.0, 10.0)


def _learner(ax: Any, data: ReportData) -> None:
    """Gradient steps per second (left axis) and idle fraction (right axis) against wall time."""
    t = data.timing
    if not t.seconds:
        nothing(ax, "no learner progress rows")
        return
    ax.plot(t.seconds, t.gradient_steps_per_s, color="tab:gray", marker=".", label="gradient steps / s")
    ax.set_ylabel("gradient steps / s")
    ax.set_xlabel("wall time since the start (s)")
    idle = t.idle_recorded
    if idle:
        twin = ax.twinx()
        twin.plot([s for s, _ in idle], [f for _, f in idle], color="tab:orange", marker=".", label="idle fraction")
        twin.set_ylim(-0.02, 1.02)
        twin.set_ylabel("learner idle fraction", color="tab:orange")
    ax.grid(alpha=0.3)


def _header(ax: Any, data: ReportData) -> None:
    """The key figures in two columns, in axes of their own (so the layout keeps the plots clear of them)."""
    ax.axis("off")
    figures = key_figures(data)
    half = (len(figures) + 1) // 2
    for col, chunk in enumerate((figures[:half], figures[half:])):
        text = "\n".join(f"{label}: {value}" for label, value in chunk)
        ax.text(0.5 * col, 1.0, text, va="top", ha="left", fontsize=10, family="monospace", transform=ax.transAxes)


def summary_figure(data: ReportData) -> Any:
    """The summary as a matplotlib figure, laid out so that no label overlaps another; PlotsUnavailableError
    without matplotlib. The caller closes it (`png` does)."""
    fig = pyplot().figure(figsize=SIZE_IN, layout="constrained")  # room for every axis label and tick label
    grid = fig.add_gridspec(3, 3, height_ratios=(0.3, 1.0, 1.0))
    _header(fig.add_subplot(grid[0, :]), data)
    returns = fig.add_subplot(grid[1, 0])
    draw_curve(returns, data.curves, "return", "steps")
    if data.curves.series:
        returns.legend(fontsize="small", loc="best")
    draw_curve(fig.add_subplot(grid[1, 1]), data.curves, "success", "steps")
    draw_curve(fig.add_subplot(grid[1, 2]), data.curves, "success", "seconds")
    draw_rates(fig.add_subplot(grid[2, 0]), data.rates)
    _learner(fig.add_subplot(grid[2, 1]), data)
    draw_buffer(fig.add_subplot(grid[2, 2]), data.run.buffer)
    return fig


def summary_png(data: ReportData) -> bytes:
    """The summary image as PNG bytes; PlotsUnavailableError without matplotlib."""
    return png(summary_figure(data))


def write_summary(data: ReportData, out: Path) -> Path:
    out.write_bytes(summary_png(data))
    return out
