"""The report's plots, drawn into matplotlib axes (Agg backend; matplotlib is imported on first use only, so the
`user` command starts without it). Each `draw_*` fills the axes it is given, or says in them that there is
nothing to draw; `png` renders a figure to PNG bytes."""

from __future__ import annotations

import io
from typing import Any, Literal

from user.learner.run_log import POOLED, CurvePoint, Curves
from user.report.buffer_summary import BufferSummary
from user.report.errors import PlotsUnavailableError
from user.report.series import Interventions, RobotRates, Timing

Axis = Literal["steps", "seconds"]
Figure = Literal["return", "success"]
DPI = 80
DEMO_COLOUR = "tab:orange"
ONLINE_COLOUR = "tab:blue"
INTERVENED_COLOUR = "tab:red"


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend; PlotsUnavailableError when matplotlib cannot be imported."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        raise PlotsUnavailableError(
            f"no plots: matplotlib cannot be imported ({exc}); install the `learn` extra"
        ) from exc
    return plt


def png(fig: Any) -> bytes:
    """`fig` as PNG bytes; the figure is closed."""
    plt = pyplot()
    out = io.BytesIO()
    try:
        fig.savefig(out, format="png", dpi=DPI)
    finally:
        plt.close(fig)
    return out.getvalue()


def nothing(ax: Any, text: str) -> None:
    """Axes that say why they are empty."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="dimgray", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _x(at: CurvePoint, axis: Axis) -> float:
    return float(at.env_steps) if axis == "steps" else at.elapsed_s


def robot_colours(robots: list[str]) -> dict[str, str]:
    """A colour per robot id, the same in every plot of a report."""
    palette = ["tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:red"]
    return {robot: palette[i % len(palette)] for i, robot in enumerate(sorted(robots))}


def draw_curve(ax: Any, curves: Curves, figure: Figure, axis: Axis) -> None:
    """Mean return or success rate of the recent window, per robot (thin), per task of a policy trained on several
    (dashed) and over all robots (thick, black)."""
    if not curves.series:
        nothing(ax, "no online episodes")
        return
    colours = robot_colours([s.label for s in curves.series if s.label != POOLED])
    for s in curves.series:
        style: dict[str, Any] = {"color": colours.get(s.label, "black"), "linewidth": 1.2}
        if s.label == POOLED:
            style["linewidth"] = 2.0
        elif s.task is not None:
            style.update(linewidth=1.6, linestyle="--")
        ys = s.mean_return if figure == "return" else s.success_rate
        ax.plot([_x(a, axis) for a in s.at], ys, label=s.label, marker="." if len(ys) < 30 else None, **style)
    if curves.demo_end is not None:
        ax.axvline(_x(curves.demo_end, axis), color=DEMO_COLOUR, linestyle="--", linewidth=1.0, label="demos end")
    if figure == "success":
        ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("environment steps" if axis == "steps" else "wall time since the start (s)")
    ax.set_ylabel(f"{'return' if figure == 'return' else 'success rate'} (last {curves.window} ep.)")
    ax.grid(alpha=0.3)


def draw_rates(ax: Any, rates: list[RobotRates]) -> None:
    """Per robot: success rate and intervention rate (intervened steps / steps) of its online episodes."""
    shown = [r for r in rates if r.online_episodes]
    if not shown:
        nothing(ax, "no online episodes")
        return
    xs = range(len(shown))
    ax.bar([x - 0.2 for x in xs], [r.success_rate or 0.0 for r in shown], 0.4, label="success", color="tab:green")
    ax.bar(
        [x + 0.2 for x in xs],
        [r.intervention_rate or 0.0 for r in shown],
        0.4,
        label="intervened steps",
        color=INTERVENED_COLOUR,
    )
    ax.set_xticks(list(xs), [f"{r.robot_id}\n({r.online_episodes} ep.)" for r in shown])
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("fraction of online episodes / steps")
    ax.legend(fontsize="small", loc="upper right")
    ax.grid(axis="y", alpha=0.3)


def draw_interventions(ax: Any, series: Interventions, window: int) -> None:
    """Intervened steps of each online episode (a dot per episode, coloured by robot) in stored order, and their
    moving mean over `window` episodes (black)."""
    if not series.steps:
        nothing(ax, "no online episodes")
        return
    colours = robot_colours(sorted(set(series.robot_ids)))
    xs = list(range(1, len(series.steps) + 1))
    for robot in sorted(set(series.robot_ids)):
        mine = [(x, v) for x, v, r in zip(xs, series.steps, series.robot_ids, strict=True) if r == robot]
        ax.scatter([x for x, _ in mine], [v for _, v in mine], s=12, color=colours[robot], label=robot)
    ax.plot(xs, series.moving_mean(window), color="black", linewidth=2.0, label=f"mean of last {window}")
    ax.set_xlabel("online episode (in the order stored)")
    ax.set_ylabel("intervened steps")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small", loc="upper right")
    ax.grid(alpha=0.3)


def draw_rate(ax: Any, timing: Timing) -> None:
    if not timing.seconds:
        nothing(ax, "no learner progress rows")
        return
    ax.plot(timing.seconds, timing.gradient_steps_per_s, color="tab:gray", marker=".")
    ax.set_ylabel("gradient steps / s")
    ax.grid(alpha=0.3)


def draw_idle(ax: Any, timing: Timing) -> None:
    idle = timing.idle_recorded
    if not idle:
        nothing(ax, "idle fraction not recorded")
        return
    ax.plot([s for s, _ in idle], [f for _, f in idle], color="tab:orange", marker=".")
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("learner idle fraction")
    ax.grid(alpha=0.3)


def draw_versions(ax: Any, timing: Timing) -> None:
    if not timing.seconds:
        nothing(ax, "no learner progress rows")
        return
    ax.step(timing.seconds, timing.policy_version, where="post", color="tab:purple")
    ax.set_ylabel("policy version")
    ax.set_xlabel("wall time since the start (s)")
    ax.grid(alpha=0.3)


def draw_buffer(ax: Any, buffer: BufferSummary | None) -> None:
    """Transitions per robot: demonstrations, online, and of those, intervened (stacked bars)."""
    if buffer is None or not buffer.robots:
        nothing(ax, "no buffer" if buffer is None else "empty buffer")
        return
    robots = sorted(buffer.robots)
    demo = [buffer.robots[r].demo_transitions for r in robots]
    intervened = [buffer.robots[r].intervened_transitions for r in robots]
    online = [buffer.robots[r].online_transitions for r in robots]
    ax.bar(robots, demo, color=DEMO_COLOUR, label="demonstration")
    ax.bar(robots, online, bottom=demo, color=ONLINE_COLOUR, label="online")
    ax.bar(robots, intervened, bottom=demo, color=INTERVENED_COLOUR, label="of which intervened", width=0.4)
    ax.set_ylabel("transitions")
    ax.legend(fontsize="small", loc="best")
    ax.grid(axis="y", alpha=0.3)
