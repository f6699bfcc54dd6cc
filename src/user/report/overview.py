"""A loaded run and what is computed from it, and the run's key figures in words (the HTML page's overview and
the PNG summary's header show the same ones)."""

from __future__ import annotations

from dataclasses import dataclass, field

from user.learner.run_log import Curves, curves
from user.report.run_dir import RunData, load_run, split_by_task
from user.report.series import Interventions, RobotRates, Timing, interventions, robot_rates, timing


@dataclass(frozen=True)
class ReportData:
    run: RunData
    curves: Curves
    rates: list[RobotRates]
    timing: Timing
    interventions: Interventions  # each online episode's intervened steps, in stored order
    # each task's run: one learner per task (`RunData.task_dirs`), or one learner's episodes of two or more tasks
    # split by task (`split_by_task`; each with its `task`)
    tasks: list[ReportData] = field(default_factory=list)
    task: str | None = None  # a task's episodes of a learner trained on several: the task's name

    @property
    def name(self) -> str:
        """The task's name for a task's episodes of a learner trained on several, else the run directory's."""
        return self.run.name if self.task is None else self.task

    @property
    def learner_per_task(self) -> bool:
        """The tasks are learners of their own, each with its run directory and report (not one learner's
        episodes split by task)."""
        return bool(self.run.task_dirs)


def report_data(run: RunData, task: str | None = None) -> ReportData:
    """What the report shows of `run` (`task`: it is that task's episodes of a learner trained on several)."""
    rows = run.episodes.rows
    if run.task_dirs:
        tasks = [report_data(load_run(path, run)) for path in run.task_dirs]
    else:
        tasks = [report_data(view, name) for name, view in split_by_task(run).items()]
    return ReportData(
        run,
        curves(rows),
        robot_rates(rows),
        timing(run.progress.rows, run.run_start),
        interventions(rows),
        tasks,
        task,
    )


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def mib(size: int) -> str:
    return f"{size / (1024 * 1024):.2f} MiB"


TREND_EPISODES = 10  # the intervention trend compares the first and the last this many online episodes


def intervention_trend(data: ReportData) -> str:
    """Mean intervened steps per online episode, first TREND_EPISODES -> last TREND_EPISODES ('-' with fewer)."""
    both = data.interventions.first_and_last(TREND_EPISODES)
    return "-" if both is None else f"{both[0]:.1f} -> {both[1]:.1f}"


def _duration(data: ReportData) -> str:
    ends = [r.elapsed_s for r in data.run.episodes.rows] + data.timing.seconds
    return f"{max(ends):.1f} s" if ends else "-"


def key_figures(data: ReportData) -> list[tuple[str, str]]:
    """(label, value) pairs; '-' where the run did not record the figure."""
    rates = data.rates
    online = sum(r.online_episodes for r in rates)
    successes = sum(r.online_successes for r in rates)
    steps = sum(r.online_steps for r in rates)
    intervened = sum(r.intervened_steps for r in rates)
    t = data.timing
    idle = [f for _, f in t.idle_recorded]
    ratio = t.updates_per_step
    buffer = data.run.buffer
    return [
        ("run", data.run.name),
        ("duration (learner's records)", _duration(data)),
        ("robots", ", ".join(r.robot_id for r in rates) or "-"),
        ("episodes", f"{online} online, {sum(r.demo_episodes for r in rates)} demonstrations"),
        ("online success rate", percent(successes / online if online else None)),
        ("intervened online steps", percent(intervened / steps if steps else None)),
        (f"intervened steps per episode, first -> last {TREND_EPISODES}", intervention_trend(data)),
        ("transitions received", str(t.env_steps[-1]) if t.env_steps else "-"),
        ("gradient steps", str(t.gradient_steps[-1]) if t.gradient_steps else "-"),
        ("gradient steps per transition", "-" if ratio is None else f"{ratio:.2f}"),
        ("policy version", str(t.policy_version[-1]) if t.policy_version else "-"),
        ("learner idle (mean of rows)", percent(sum(idle) / len(idle) if idle else None)),
        (
            "buffer",
            "-" if buffer is None else f"{buffer.info.transitions} transitions, {mib(buffer.info.bytes_on_disk)}",
        ),
    ]
