"""`write_report`: a run directory to report.html (self-contained) and report.png (the summary) beside it."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from user.report.errors import PlotsUnavailableError
from user.report.figures import TASKS, section_figures
from user.report.overview import ReportData, report_data
from user.report.page import render
from user.report.plots import pyplot
from user.report.run_dir import load_run
from user.report.summary import write_summary

_log = logging.getLogger("user.report")

HTML_NAME = "report.html"


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    png: Path | None  # None: no summary image (matplotlib missing, see `notes`)
    notes: list[str] = field(default_factory=list)  # what the run directory lacked, as the page lists it


def default_out(run_dir: Path) -> Path:
    return run_dir / HTML_NAME


def write_report(run_dir: Path, out: Path | None = None) -> ReportFiles:
    """Write the HTML report of `run_dir` to `out` (default RUN_DIR/report.html) and the summary PNG beside it
    (same name, .png). NotARunDirectoryError when `run_dir` is not a run directory; OSError when `out` cannot be
    written. Anything missing from the run directory is said in the report. A deployment with one learner per
    task also gets each task's own report in its task directory (<task>/report.html), linked from this one (one
    learner trained on several tasks: its one report shows the tasks side by side)."""
    html_path = default_out(run_dir) if out is None else out
    data = report_data(load_run(run_dir))
    links: dict[str, str] = {}
    notes: list[str] = []
    for task in data.tasks if data.learner_per_task else []:
        written = _write(task, default_out(task.run.path))
        links[task.name] = os.path.relpath(written.html, html_path.parent)
        notes += [f"{task.name}: {line}" for line in written.notes]
    written = _write(data, html_path, links)
    return ReportFiles(written.html, written.png, written.notes + notes)


def _write(data: ReportData, html_path: Path, task_links: dict[str, str] | None = None) -> ReportFiles:
    plots_note: str | None = None
    try:
        pyplot()  # the page says so when there will be no plots, even where this run has nothing to draw
        figures = section_figures(data)
    except PlotsUnavailableError as exc:
        figures, plots_note = {}, str(exc)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    _write_text(html_path, render(data, figures, plots_note, task_links))
    png_path: Path | None = html_path.with_suffix(".png")
    if TASKS in figures and data.learner_per_task:  # the tasks side by side: the summary of learners per task
        html_path.with_suffix(".png").write_bytes(figures[TASKS])
    else:
        try:
            png_path = write_summary(data, html_path.with_suffix(".png"))
        except PlotsUnavailableError as exc:
            _log.warning("%s", exc)
            png_path = None
    notes = list(data.run.notes) + ([plots_note] if plots_note else [])
    return ReportFiles(html_path, png_path, notes)


def _write_text(path: Path, text: str) -> None:
    """Written whole: a temporary file renamed over `path` (a reader never sees half a page)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
