"""The report as one self-contained HTML page: plots inlined as base64 PNG, styles inline, no script, font or
external URL; every text from the run directory HTML-escaped. Sections (their ids): overview, missing,
learning-curves, tasks (only for one learner trained on several tasks: each task's figures and curves), robots,
pipeline, buffer, nodes, configuration; a deployment with one learner per task: missing, tasks (each task's
figures and curves, a link to its own report), nodes, configuration."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape

from user.report.figures import BUFFER, CURVES, ROBOTS, TASKS, TIMING
from user.report.overview import TREND_EPISODES, ReportData, intervention_trend, key_figures, mib, percent
from user.report.tasks import SUCCESS_TARGET, task_figures

NOT_RECORDED = (
    "Not recorded by the run, so not shown: the learner's time split into waiting for, sampling and updating on "
    "batches (progress.csv has only the idle fraction: time waiting for an allowed batch over all its time), the "
    "time to publish and apply weights, and the rollout's and robots' latencies. Losses and other training "
    "diagnostics are in tensorboard/."
)
COUNTED = (
    "Counted in the buffer's index when this report was written, as is the overview's buffer figure. The learner "
    "pipeline's counts are the learner's own at its last progress row (one per stats period), so they can be lower."
)
STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f0f0f0; text-align: left; } td.n { text-align: right; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: .85em; }
img { max-width: 100%; } .missing { color: #a33; } .note { color: #555; }
"""


def image(data: bytes, alt: str) -> str:
    return f'<img alt="{escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode("ascii")}">'


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An HTML table; numbers right-aligned, everything escaped."""

    def cell(value: object) -> str:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return f"<td{' class=n' if numeric else ''}>{escape(str(value))}</td>"

    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{header}</tr>{body}</table>"


def section(ident: str, title: str, *parts: str) -> str:
    return f'<section id="{ident}"><h2>{escape(title)}</h2>\n' + "\n".join(parts) + "\n</section>"


def missing(text: str) -> str:
    return f'<p class="missing">{escape(text)}</p>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _figure(figures: Mapping[str, bytes], name: str, alt: str, absent: str) -> str:
    return image(figures[name], alt) if name in figures else missing(absent)


def _overview(data: ReportData) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in key_figures(data))
    return section("overview", "Overview", f"<table>{rows}</table>")


def _missing(data: ReportData, plots_note: str | None) -> str:
    notes = list(data.run.notes) + ([plots_note] if plots_note else [])
    if not notes:
        return section("missing", "What is missing", note("Nothing: every part of the run directory was read."))
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return section("missing", "What is missing", f'<ul class="missing">{items}</ul>')


def _curves(data: ReportData, figures: Mapping[str, bytes]) -> str:
    tasks = " and over each task's (dashed)" if any(s.task is not None for s in data.curves.series) else ""
    about = (
        f"Mean return and success rate over each robot's latest {data.curves.window} online episodes (thin){tasks} "
        "and over all robots' (thick, black), after each online episode; the dashed vertical line: the "
        "demonstrations end. Left: against environment steps; right: against wall time."
    )
    absent = "No online episode recorded: no learning curve."
    return section(
        "learning-curves", "Learning curves", note(about), _figure(figures, CURVES, "learning curves", absent)
    )


def _robots(data: ReportData, figures: Mapping[str, bytes]) -> str:
    rows = [
        (
            r.robot_id,
            r.demo_episodes,
            r.online_episodes,
            percent(r.success_rate),
            r.online_steps,
            r.intervened_steps,
            percent(r.intervention_rate),
            r.intervened_episodes,
        )
        for r in data.rates
    ]
    head = (
        "robot",
        "demo episodes",
        "online episodes",
        "success (online)",
        "online steps",
        "intervened steps",
        "intervention rate (steps)",
        "episodes with interventions",
    )
    body = table(head, rows) if rows else missing("No episode recorded.")
    if rows:
        body += note(
            f"Intervened steps per online episode, mean of the first {TREND_EPISODES} -> the last {TREND_EPISODES}: "
            f"{intervention_trend(data)}. Right of the rates: each online episode's intervened steps in the order "
            f"stored, and their mean over {TREND_EPISODES} episodes."
        )
    plot = _figure(figures, ROBOTS, "success and intervention rates per robot", "No online episode.")
    return section("robots", "Success and interventions per robot", body, plot)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _pipeline(data: ReportData, figures: Mapping[str, bytes]) -> str:
    t = data.timing
    title = "Learner pipeline (timing)"
    if not t.seconds:
        return section("pipeline", title, missing("No learner progress row: no timing."), note(NOT_RECORDED))
    idle = [f for _, f in t.idle_recorded]
    rate = t.gradient_steps_per_s
    ratio = t.updates_per_step
    rows = [
        ("progress rows", len(t.seconds)),
        ("gradient steps per second (last / mean / max)", f"{rate[-1]:.1f} / {_mean(rate):.1f} / {max(rate):.1f}"),
        (
            "learner idle fraction (last / mean)",
            f"{percent(idle[-1])} / {percent(_mean(idle))}" if idle else "not recorded",
        ),
        ("gradient steps per transition received", "-" if ratio is None else f"{ratio:.2f}"),
        ("policy versions published", t.policy_version[-1]),
        (
            f"transitions received / stored in the buffer at the last progress row ({t.seconds[-1]:.0f} s)",
            f"{t.env_steps[-1]} / {t.buffer_transitions[-1]}",
        ),
    ]
    plot = image(figures[TIMING], "learner timing") if TIMING in figures else ""
    return section("pipeline", title, table(("figure", "value"), rows), plot, note(NOT_RECORDED))


def _buffer(data: ReportData, figures: Mapping[str, bytes]) -> str:
    b = data.run.buffer
    if b is None:
        return section("buffer", "Replay buffer", missing("No readable buffer (see What is missing)."))
    rows = [
        (robot, c.episodes, c.demo_episodes, c.demo_transitions, c.online_transitions, c.intervened_transitions)
        for robot, c in sorted(b.robots.items())
    ]
    rows.append(
        (
            "all",
            b.info.episodes,
            sum(c.demo_episodes for c in b.robots.values()),
            b.info.demo_transitions,
            b.online_transitions,
            sum(c.intervened_transitions for c in b.robots.values()),
        )
    )
    head = ("robot", "episodes", "demo episodes", "demo transitions", "online transitions", "intervened transitions")
    disk = [
        ("segments", f"{b.info.segments_closed} closed, {b.info.segments_open} open, {mib(b.segment_bytes)}"),
        ("index and the rest", mib(b.other_bytes)),
        ("all on disk", mib(b.info.bytes_on_disk)),
    ]
    plot = _figure(figures, BUFFER, "buffer composition per robot", "The buffer is empty.")
    return section("buffer", "Replay buffer", table(head, rows), table(("disk use", ""), disk), plot, note(COUNTED))


def _nodes(data: ReportData) -> str:
    run = data.run
    nodes = table(("node", "last status", "reason"), [(n.name, n.state, n.reason) for n in run.nodes])
    checkpoints = table(("checkpoint", "bytes"), [(c.name, c.size) for c in run.checkpoints])
    return section(
        "nodes",
        "Nodes and checkpoints",
        nodes if run.nodes else missing("No node status recorded."),
        checkpoints if run.checkpoints else missing("No checkpoint."),
    )


def _configuration(data: ReportData) -> str:
    text = data.run.config_text
    body = f"<pre>{escape(text)}</pre>" if text is not None else missing("deployment.yaml is missing.")
    return section("configuration", "Configuration (deployment.yaml)", body)


def _tasks(data: ReportData, figures: Mapping[str, bytes], links: Mapping[str, str]) -> str:
    rows = []
    window = data.tasks[0].curves.window
    for task in data.tasks:
        f = task_figures(task)
        rows.append(
            (
                f.task,
                f.robots,
                f"{f.online_episodes} online, {f.demo_episodes} demonstrations",
                percent(f.recent_success),
                "not reached" if f.reached_s is None else f"{f.reached_s:.0f} s",
                "-" if f.reached_episodes is None else f.reached_episodes,
                "-" if f.env_steps is None else f.env_steps,
                "-" if f.gradient_steps is None else f.gradient_steps,
            )
        )
    head = (
        "task",
        "robots",
        "episodes",
        f"success (last {window} online)",
        f"time to {SUCCESS_TARGET:.0%} success",
        "online episodes by then",
        "transitions received",
        "gradient steps",
    )
    if data.learner_per_task:
        about = "One learner per task, each with its own run directory."
    else:
        about = (
            "One learner trains one policy on every task; a task's episodes are those episodes.csv names it in. "
            "Transitions received and gradient steps are not counted per task: the learner's are in the overview."
        )
    about += (
        " Time to success: from its learner's start to the first online episode after which the task's last "
        f"{window} online episodes succeeded at {SUCCESS_TARGET:.0%} or more."
    )
    reports = "".join(
        f'<li><a href="{escape(links[t.name])}">{escape(t.name)}</a></li>' for t in data.tasks if t.name in links
    )
    plot = _figure(figures, TASKS, "success and return per task", "No online episode in any task.")
    parts = [note(about), table(head, rows), plot]
    if reports:
        parts.append(f"<p>Each task's own report (curves per robot, learner, buffer):</p><ul>{reports}</ul>")
    return section("tasks", "Tasks", *parts)


def render(
    data: ReportData,
    figures: Mapping[str, bytes],
    plots_note: str | None = None,
    task_links: Mapping[str, str] | None = None,
) -> str:
    """The whole page. `figures`: section figures (user.report.figures); `plots_note`: why there are none;
    `task_links`: task name -> the address of its own report, relative to this page."""
    title = f"Run report: {data.run.name}"
    if data.learner_per_task:
        parts = [
            _missing(data, plots_note),
            _tasks(data, figures, task_links or {}),
            _nodes(data),
            _configuration(data),
        ]
    else:
        parts = [
            _overview(data),
            _missing(data, plots_note),
            _curves(data, figures),
            *([_tasks(data, figures, {})] if data.tasks else []),
            _robots(data, figures),
            _pipeline(data, figures),
            _buffer(data, figures),
            _nodes(data),
            _configuration(data),
        ]
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head>\n<body><h1>{escape(title)}</h1>\n"
        f"{note(f'From {data.run.path}')}\n" + "\n".join(parts) + "\n</body></html>\n"
    )
