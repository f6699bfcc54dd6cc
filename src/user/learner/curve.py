"""`learning_curve.png`: what was learned, against environment steps (left) and wall time (right).

Rows: the mean return and the success rate over each robot's latest online episodes (one thin line per robot)
and over all robots' (the thick "all robots" line), then the learner's gradient steps per second. A dashed
vertical line marks where the demonstrations end (the end of the last demonstration episode). The series are
computed from `episodes.csv` and `progress.csv` by `curve_data` (tested); `draw` only renders them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from user.buffer.episode_window import RECENT_EPISODES, EpisodeOutcome, RecentEpisodes, WindowStats

_log = logging.getLogger("user.learner.progress")

POOLED = "all robots"  # the label of the series over every robot's episodes


@dataclass(frozen=True)
class CurvePoint:
    env_steps: int  # transitions the learner had received
    elapsed_s: float  # wall-clock seconds since the run started


@dataclass
class CurveSeries:
    """Recent-window figures after each online episode of one robot (or of all robots)."""

    label: str  # a robot id, or POOLED
    at: list[CurvePoint] = field(default_factory=list)
    mean_return: list[float] = field(default_factory=list)
    success_rate: list[float] = field(default_factory=list)

    def add(self, at: CurvePoint, stats: WindowStats) -> None:
        self.at.append(at)
        self.mean_return.append(stats.mean_return)
        self.success_rate.append(stats.success_rate)


@dataclass(frozen=True)
class CurveData:
    series: list[CurveSeries]  # one per robot (by id), then POOLED
    demo_end: CurvePoint | None  # where the last demonstration episode ended; None without demonstrations
    rate_at: list[CurvePoint]  # progress rows
    gradient_steps_per_s: list[float]  # the learner's rate at each progress row


def outcome_of(row: Mapping[str, str]) -> tuple[CurvePoint, EpisodeOutcome]:
    """One episodes.csv row; ValueError/KeyError/TypeError when it is not whole (a run killed mid-line)."""
    at = CurvePoint(int(row["env_steps"]), float(row["elapsed_s"]))
    outcome = EpisodeOutcome(
        robot_id=row["robot_id"],
        episode_id=int(row["episode_id"]),
        steps=int(row["steps"]),
        episode_return=float(row["episode_return"]),
        success=bool(int(row["success"])),
        interventions=int(row["interventions"]),
        is_demo=bool(int(row["is_demo"])),
    )
    return at, outcome


def curve_data(
    episodes: Sequence[Mapping[str, str]],
    progress: Sequence[Mapping[str, str]],
    run_start: float,
    window: int = RECENT_EPISODES,
) -> CurveData:
    """The series learning_curve.png draws: `episodes` (episodes.csv rows), `progress` (progress.csv rows) and
    the wall time the run started at (progress times are drawn relative to it). Rows not whole are skipped."""
    recent = RecentEpisodes(window)
    robots: dict[str, CurveSeries] = {}
    pooled = CurveSeries(POOLED)
    demo_end: CurvePoint | None = None
    for row in episodes:
        try:
            at, outcome = outcome_of(row)
        except (KeyError, TypeError, ValueError):
            continue
        if not recent.add(outcome):  # a demonstration
            if demo_end is None or at.env_steps >= demo_end.env_steps:
                demo_end = at
            continue
        pooled.add(at, _stats(recent.pooled()))
        robots.setdefault(outcome.robot_id, CurveSeries(outcome.robot_id)).add(
            at, _stats(recent.robots()[outcome.robot_id])
        )
    rate_at: list[CurvePoint] = []
    rates: list[float] = []
    for row in progress:
        try:
            at, rate = (
                CurvePoint(int(row["env_steps"]), float(row["wall_time"]) - run_start),
                float(row["gradient_steps_per_s"]),
            )
        except (KeyError, TypeError, ValueError):
            continue
        rate_at.append(at)
        rates.append(rate)
    return CurveData([robots[r] for r in sorted(robots)] + [pooled], demo_end, rate_at, rates)


def _stats(stats: WindowStats | None) -> WindowStats:
    assert stats is not None  # an online episode was just added to this window
    return stats


def draw(data: CurveData, out: Path, title: str, window: int = RECENT_EPISODES) -> Path | None:
    """Render `data` to `out` (PNG); None (logged) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        _log.warning("no learning-curve PNG: %s", exc)
        return None
    fig, axes = plt.subplots(3, 2, figsize=(11, 8), sharex="col")
    for col, x_of in enumerate((_steps, _seconds)):
        _draw_column(axes[:, col], data, x_of)
    axes[0, 0].set_ylabel(f"return (mean, last {window} ep.)")
    axes[1, 0].set_ylabel(f"success (last {window} ep.)")
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


def _draw_column(axes: Any, data: CurveData, x_of: Any) -> None:
    for s in data.series:
        pooled = s.label == POOLED
        style: dict[str, Any] = {"color": "black", "linewidth": 2.0} if pooled else {"linewidth": 1.0, "alpha": 0.8}
        xs = [x_of(a) for a in s.at]
        axes[0].plot(xs, s.mean_return, label=s.label, **style)
        axes[1].plot(xs, s.success_rate, label=s.label, **style)
    axes[1].set_ylim(-0.02, 1.02)
    axes[2].plot([x_of(a) for a in data.rate_at], data.gradient_steps_per_s, color="tab:gray")
    if data.demo_end is not None:
        for ax in axes:
            ax.axvline(x_of(data.demo_end), color="tab:red", linestyle="--", linewidth=1.0)
        axes[0].annotate(
            "demos end",
            (x_of(data.demo_end), 1.0),
            xycoords=("data", "axes fraction"),
            fontsize="small",
            color="tab:red",
            va="top",
        )
