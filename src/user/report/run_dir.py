"""A run directory (what `user bringup --run-dir` and the learner write) loaded into typed data for the report.

Every piece is optional: a run that crashed early has no progress rows, a learner-less deployment has no buffer.
What is missing or cannot be read becomes one line in `RunData.notes` that the report shows; only a path that is
not a run directory at all raises (NotARunDirectoryError, naming what was expected).

A deployment with one learner per task (`config/multi_task.yaml`) has each learner's files in a sub-directory of
the run directory ({run_dir}/<task>: progress.csv, episodes.csv, buffer/, checkpoints/): those are the run's
`task_dirs`, each loaded as a run of its own with the deployment's configuration and nodes.

A deployment with one learner training one policy on several tasks has one learner's files, its episodes.csv
saying each episode's task: `split_by_task` gives each task's episodes as a run of its own (a view, no
directory of its own)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.errors import BufferError
from user.learner.run_log import (
    EPISODES_CSV,
    PROGRESS_CSV,
    EpisodeRow,
    ProgressRow,
    Table,
    read_episodes,
    read_progress,
    started_at,
    tasks_of,
)
from user.report.buffer_summary import BufferSummary, load_buffer
from user.report.errors import NotARunDirectoryError
from user.runtime.status import LIVE, read_status

_log = logging.getLogger("user.report")

DEPLOYMENT = "deployment.yaml"
# A run directory holds at least one of these (bringup writes deployment.yaml and logs/, the learner the rest)
RUN_MARKERS = (DEPLOYMENT, EPISODES_CSV, PROGRESS_CSV, "logs", "buffer", "checkpoints")
MAX_CONFIG_BYTES = 1_000_000  # a deployment file larger than this is shown cut


@dataclass(frozen=True)
class NodeState:
    """A node's last status line (logs/<node>.status): starting, running, stopped, config-error, failed or
    complete (`user.runtime.status`)."""

    name: str
    state: str
    reason: str


@dataclass(frozen=True)
class FileSize:
    name: str
    size: int  # bytes


@dataclass
class RunData:
    path: Path
    episodes: Table[EpisodeRow]
    progress: Table[ProgressRow]
    config_text: str | None = None  # deployment.yaml as written
    buffer: BufferSummary | None = None
    nodes: list[NodeState] = field(default_factory=list)
    checkpoints: list[FileSize] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is missing or unreadable, one line each
    task_dirs: list[Path] = field(default_factory=list)  # one learner per task: each learner's run directory

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def run_start(self) -> float | None:
        """The run's start (epoch s) as the learner counts it: from its first progress row, else its first episode
        row; None without either."""
        start = started_at(self.progress.rows)
        return started_at(self.episodes.rows) if start is None else start


def check_run_dir(path: Path) -> None:
    """NotARunDirectoryError unless `path` is a directory holding at least one of a run's files."""
    if not path.exists():
        raise NotARunDirectoryError(f"{path}: no such directory (expected a run directory of `user bringup`)")
    if not path.is_dir():
        raise NotARunDirectoryError(f"{path}: not a directory (expected a run directory of `user bringup`)")
    if not any((path / marker).exists() for marker in RUN_MARKERS):
        raise NotARunDirectoryError(
            f"{path}: not a run directory: expected at least one of {', '.join(RUN_MARKERS)} in it "
            "(as `user bringup --run-dir` writes)"
        )


def load_run(path: Path, deployment: RunData | None = None) -> RunData:
    """Everything the report shows of the run directory at `path`; `deployment`: the run whose task directory
    `path` is (its configuration and nodes are the task's)."""
    check_run_dir(path)
    run = RunData(path, read_episodes(path), read_progress(path))
    run.task_dirs = task_dirs(path) if deployment is None else []
    if not run.task_dirs:  # a learner's own files: each one missing is said
        for table, what in ((run.episodes, "episode"), (run.progress, "learner progress")):
            if not table.present:
                run.notes.append(f"{table.path.name} is missing: no {what} rows (did the learner start?)")
            elif not table.rows and not table.problems:
                run.notes.append(f"{table.path.name} has no rows yet: no {what} was recorded")
            run.notes.extend(table.problems)
        run.buffer = _buffer(path / "buffer", run.notes)
        run.checkpoints = _checkpoints(path / "checkpoints", run.notes)
    if deployment is None:
        run.config_text = _config_text(path / DEPLOYMENT, run.notes)
        run.nodes = _nodes(path / "logs", run.notes)
    else:
        run.config_text, run.nodes = deployment.config_text, deployment.nodes
    return run


def task_dirs(path: Path) -> list[Path]:
    """The sub-directories of `path` a learner writes its progress into (one learner per task), by name."""
    try:
        children = sorted(child for child in path.iterdir() if child.is_dir())
    except OSError:
        return []
    return [child for child in children if (child / PROGRESS_CSV).is_file() or (child / EPISODES_CSV).is_file()]


def split_by_task(run: RunData) -> dict[str, RunData]:
    """One learner's episodes of two or more tasks, each task's as a run (by task name): its episodes only, and
    no progress rows (one learner's counts are not split by task), buffer, checkpoints or notes (those are the
    learner's, shown once); its episodes' times still count from the learner's start. Empty for one task."""
    rows = run.episodes.rows
    tasks = tasks_of(rows)
    if len(tasks) < 2:
        return {}
    return {
        task: RunData(
            run.path,
            Table(run.episodes.path, True, [row for row in rows if row.task == task]),
            Table(run.progress.path, run.progress.present),
            config_text=run.config_text,
            nodes=run.nodes,
        )
        for task in tasks
    }


def _config_text(path: Path, notes: list[str]) -> str | None:
    if not path.is_file():
        notes.append(f"{path.name} is missing: the run's configuration cannot be shown")
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        notes.append(f"{path.name} cannot be read: {exc}")
        return None
    if len(text) > MAX_CONFIG_BYTES:
        notes.append(f"{path.name} is larger than {MAX_CONFIG_BYTES} bytes: shown cut")
        return text[:MAX_CONFIG_BYTES]
    return text


def _buffer(path: Path, notes: list[str]) -> BufferSummary | None:
    if not path.is_dir():
        notes.append("no buffer/ directory: the buffer's composition cannot be shown")
        return None
    try:
        return load_buffer(path)
    except (BufferError, OSError) as exc:
        _log.debug("buffer %s not read", path, exc_info=True)
        notes.append(f"the buffer cannot be read: {exc}")
        return None


def _nodes(logs: Path, notes: list[str]) -> list[NodeState]:
    if not logs.is_dir():
        notes.append("no logs/ directory: the nodes' states are unknown")
        return []
    nodes = []
    for path in sorted(logs.glob("*.status")):
        status = read_status(path)
        if status is None:
            nodes.append(NodeState(path.stem, "unknown", f"{path.name} holds no status line"))
        else:
            nodes.append(NodeState(path.stem, status.state, status.reason))
    if not nodes:
        notes.append("logs/ holds no *.status file: the nodes' states are unknown")
    live = [f"{n.name} ({n.state})" for n in nodes if n.state in LIVE]
    if live:
        notes.append(
            f"last status of {', '.join(live)}: if the run is over, how they ended was not recorded (their "
            "launcher was killed as well, or the run is older than the `stopped` state)"
        )
    return nodes


def _checkpoints(path: Path, notes: list[str]) -> list[FileSize]:
    if not path.is_dir():
        notes.append("no checkpoints/ directory: the learner saved no checkpoint")
        return []
    found = []
    for file in sorted(path.iterdir()):
        try:
            found.append(FileSize(file.name, file.stat().st_size))
        except OSError:
            continue  # removed while listing (the learner replaces latest.pt)
    return found
