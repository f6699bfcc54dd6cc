"""`learning_curve.png`: what was learned, against environment steps (left) and wall time (right).

Rows: the mean return and the success rate over each robot's latest online episodes (one thin line per robot),
over each task's when one policy is trained on several (one dashed line per task, "task <name>") and over all
robots' (the thick "all robots" line), then the learner's gradient steps per second. A dashed
vertical line marks where the demonstrations end (the end of the last demonstration episode). The curves are the
run log's (`user.learner.run_log.curves`, over episodes.csv), the rate is progress.csv's at each row
(`rate_points`); `draw` only renders them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from user.learner.run_log import POOLED, CurvePoint, Curves, CurveSeries, ProgressRow

_log = logging.getLogger("user.learner.progress")


def rate_points(progress: Sequence[ProgressRow], run_start: float) -> list[CurvePoint]:
    """Where the learner's rate of each progress row is drawn: its env steps, and its wall time since `run_start`."""
    return [CurvePoint(row.env_steps, row.wall_time - run_start) for row in progress]


def draw(curves: Curves, progress: Sequence[ProgressRow], run_start: float, out: Path, title: str) -> Path | None:
    """Render `curves` and the learner's rate at each of the `progress` rows (see `rate_points`) to `out` (PNG);
    None (logged) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        _log.warning("no learning-curve PNG: %s", exc)
        return None
    fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex="col")
    rate_at, rates = rate_points(progress, run_start), [row.gradient_steps_per_s for row in progress]
    for col, x_of in enumerate((_steps, _seconds)):
        _draw_column(axes[:, col], curves, rate_at, rates, x_of)
    axes[0, 0].set_ylabel(f"return (mean, last {curves.window} ep.)")
    axes[1, 0].set_ylabel(f"success (last {curves.window} ep.)")
    axes[2, 0].set_ylabel("gradient steps / s")
    axes[2, 0].set_xlabel("environment steps")
    axes[2, 1].set_xlabel("wall time (s)")
    axes[0, 1].legend(fontsize="small", loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return out


def _steps(at: CurvePoint) -> float:
    return float(at.env_steps)


def _seconds(at: CurvePoint) -> float:
    return at.elapsed_s


def _style(series: CurveSeries) -> dict[str, Any]:
    """All robots' line thick and black, a task's dashed, a robot's thin."""
    if series.label == POOLED:
        return {"color": "black", "linewidth": 2.0}
    if series.task is not None:
        return {"linewidth": 1.6, "linestyle": "--"}
    return {"linewidth": 1.0, "alpha": 0.8}


def _draw_column(axes: Any, curves: Curves, rate_at: list[CurvePoint], rates: list[float], x_of: Any) -> None:
    for s in curves.series:
        style = _style(s)
        xs = [x_of(a) for a in s.at]
        axes[0].plot(xs, s.mean_return, label=s.label, **style)
        axes[1].plot(xs, s.success_rate, label=s.label, **style)
    axes[1].set_ylim(-0.02, 1.02)
    axes[2].plot([x_of(a) for a in rate_at], rates, color="tab:gray")
    if curves.demo_end is not None:
        for ax in axes:
            ax.axvline(x_of(curves.demo_end), color="tab:red", linestyle="--", linewidth=1.0)
        axes[0].annotate(
            "demos end",
            (x_of(curves.demo_end), 1.0),
            xycoords=("data", "axes fraction"),
            fontsize="small",
            color="tab:red",
            va="top",
        )
