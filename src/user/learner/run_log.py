"""A run's log files, `progress.csv` and `episodes.csv`: what they hold, reading them back, and the learning curve
computed from them. `user.learner.progress` writes them (through `user.learner.csv_log`); learning_curve.png
(`user.learner.curve`) and the report (`user report`) read them here.

The schema of each file is one row class: its fields are the file's columns in the order written, and each
field's type says how its cell is read (`bool`: 0 or 1; `float | None`: a number or an empty cell, or a column
an older version did not write). A row that cannot be read is not fatal: `read_table` keeps the rows it can read
and says, for each one it cannot, which file, line and column was wrong (`MalformedRowError`'s message). The last
line of a run killed while writing is such a row; bytes that are not UTF-8 are read as replacement characters.

The learning curve (`curves`): the mean return and the success rate over each robot's latest online episodes, over
each task's when the episodes are of several tasks (one policy trained on them all), and over all robots' (the
windows of `user.buffer.episode_window`), after each online episode, at its env steps and its time since the run
started; and where the demonstrations end.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from user.buffer.episode_window import RECENT_EPISODES, EpisodeOutcome, RecentEpisodes, WindowStats

EPISODES_CSV = "episodes.csv"
PROGRESS_CSV = "progress.csv"
PROGRESS_RENAMED = {"updates_per_s": "gradient_steps_per_s"}  # progress.csv of older versions: old -> new name
EPISODES_ADDED = {"task": ""}  # episodes.csv columns older versions did not write -> what their rows read as
POOLED = "all robots"  # the label of the curve over every robot's episodes

Row = Mapping[str, "str | None"]
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class EpisodeRow:
    """One row of episodes.csv: one stored episode, demonstrations included."""

    wall_time: float  # seconds since the epoch when the learner stored the episode
    elapsed_s: float  # since the run first started (a resumed run continues)
    env_steps: int  # the learner's count of transitions received, this episode's included
    robot_id: str
    task: str = ""  # the task of the episode ("": an older episodes.csv, which did not say)
    episode_id: int  # the robot's episode number
    steps: int  # transitions in the episode
    episode_return: float
    success: bool
    interventions: int  # steps in which a human overrode the policy
    is_demo: bool

    def outcome(self) -> EpisodeOutcome:
        """The episode as the recent windows take it."""
        return EpisodeOutcome(
            robot_id=self.robot_id,
            episode_id=self.episode_id,
            steps=self.steps,
            episode_return=self.episode_return,
            success=self.success,
            interventions=self.interventions,
            is_demo=self.is_demo,
            task=self.task,
        )


@dataclass(frozen=True, kw_only=True)
class ProgressRow:
    """One row of progress.csv: the learner's figures at one stats period. None: an empty cell or a column the
    file does not have (the recent-window figures, over the latest RECENT_EPISODES online episodes, are empty before
    the first; a file of an older version lacks the later columns)."""

    wall_time: float
    elapsed_s: float  # seconds the learner has run, over all starts of the run (a resumed run continues the last row's)
    env_steps: int
    episodes: int
    successes: int
    recent_success_rate: float | None = None  # demonstrations included (as `successes`); always written
    update_calls: int
    gradient_steps: int
    gradient_steps_per_s: float  # was `updates_per_s`
    policy_version: int
    buffer_transitions: int
    idle_fraction: float | None = None  # the learner's time waiting for an allowed batch / its time
    buffer_wait_fraction: float | None = None  # of the wall time, waiting for a batch being made (decoding)
    recent_return_mean: float | None = None
    last_return: float | None = None
    recent_length_mean: float | None = None
    recent_online_success_rate: float | None = None
    recent_interventions_mean: float | None = None


class MalformedRowError(ValueError):
    """A row of a run's CSV file that cannot be read; the message names the file, the line and the column."""


@dataclass
class Table(Generic[T]):
    """The rows of one CSV file that could be read, and what could not."""

    path: Path
    present: bool  # the file exists
    rows: list[T] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line each: file, line, what is wrong


class _Cells:
    """The cells of one row, read with errors that name the file, line and column."""

    def __init__(self, row: Row, where: str) -> None:
        self.row = row
        self.where = where

    def text(self, column: str) -> str:
        value = self.row.get(column)
        if value is None:
            raise MalformedRowError(f"{self.where}: column {column!r} is missing (the row ends early)")
        return value

    def number(self, column: str, kind: Callable[[str], float | int]) -> float | int:
        value = self.text(column)
        try:
            return kind(value)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise MalformedRowError(f"{self.where}: column {column!r}: {value!r} is not {what}") from None

    def integer(self, column: str) -> int:
        return int(self.number(column, int))

    def real(self, column: str) -> float:
        return float(self.number(column, float))

    def flag(self, column: str) -> bool:
        value = self.text(column)
        if value not in ("0", "1"):
            raise MalformedRowError(f"{self.where}: column {column!r}: {value!r} is not 0 or 1")
        return value == "1"

    def optional(self, column: str) -> float | None:
        """A number, or None for an empty cell or a column the file does not have."""
        return None if not self.row.get(column) else self.real(column)


_READ_AS: dict[str, Callable[[_Cells, str], Any]] = {  # a row field's type -> how its cell is read
    "str": _Cells.text,
    "int": _Cells.integer,
    "float": _Cells.real,
    "bool": _Cells.flag,
    "float | None": _Cells.optional,
}


# (column, how its cell is read) for each field of the row class, in order (a KeyError at import for a type not read)
_EPISODE_CELLS = tuple((f.name, _READ_AS[str(f.type)]) for f in fields(EpisodeRow))
_PROGRESS_CELLS = tuple((f.name, _READ_AS[str(f.type)]) for f in fields(ProgressRow))
EPISODE_COLUMNS = tuple(name for name, _ in _EPISODE_CELLS)  # episodes.csv's header
PROGRESS_COLUMNS = tuple(name for name, _ in _PROGRESS_CELLS)  # progress.csv's header


def parse_episode(row: Row, where: str) -> EpisodeRow:
    """One episodes.csv row, a column an older version did not write read as `EPISODES_ADDED` says (a cell of a
    row that ends early is still missing); MalformedRowError naming `where` ('episodes.csv line 7') and the
    column."""
    c = _Cells({**EPISODES_ADDED, **row}, where)
    return EpisodeRow(**{column: read(c, column) for column, read in _EPISODE_CELLS})


def parse_progress(row: Row, where: str) -> ProgressRow:
    """One progress.csv row, an older version's column names read as today's; MalformedRowError naming `where`
    and the column."""
    c = _Cells({PROGRESS_RENAMED.get(k, k): v for k, v in row.items()}, where)
    return ProgressRow(**{column: read(c, column) for column, read in _PROGRESS_CELLS})


def read_table(path: Path, parse: Callable[[Row, str], T]) -> Table[T]:
    """Every row of `path` that `parse` can read; a missing file is an empty table with `present` False."""
    if not path.is_file():
        return Table(path, present=False)
    table: Table[T] = Table(path, present=True)
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.DictReader(f)
            for row in reader:
                try:
                    table.rows.append(parse(row, f"{path.name} line {reader.line_num}"))
                except MalformedRowError as exc:
                    table.problems.append(str(exc))
    except (OSError, csv.Error) as exc:
        table.problems.append(f"{path.name}: cannot be read ({exc})")
    return table


def read_episodes(run_dir: Path) -> Table[EpisodeRow]:
    return read_table(run_dir / EPISODES_CSV, parse_episode)


def read_progress(run_dir: Path) -> Table[ProgressRow]:
    return read_table(run_dir / PROGRESS_CSV, parse_progress)


def started_at(rows: Sequence[ProgressRow] | Sequence[EpisodeRow]) -> float | None:
    """When the run first started (epoch s): its first row's wall time less its elapsed time (the first progress
    row's elapsed time and every episode row's count from it); None without rows."""
    return rows[0].wall_time - rows[0].elapsed_s if rows else None


@dataclass(frozen=True)
class CurvePoint:
    env_steps: int  # transitions the learner had received
    elapsed_s: float  # wall-clock seconds since the run started


@dataclass
class CurveSeries:
    """Recent-window figures after each online episode of one robot, of one task or of all robots."""

    label: str  # a robot id, `task_label(task)`, or POOLED
    at: list[CurvePoint] = field(default_factory=list)
    mean_return: list[float] = field(default_factory=list)
    success_rate: list[float] = field(default_factory=list)
    task: str | None = None  # a task's series: its name (None: a robot's or all robots')

    def add(self, at: CurvePoint, stats: WindowStats) -> None:
        self.at.append(at)
        self.mean_return.append(stats.mean_return)
        self.success_rate.append(stats.success_rate)


def task_label(task: str) -> str:
    """The label of a task's series (apart from any robot id)."""
    return f"task {task}"


def tasks_of(episodes: Sequence[EpisodeRow]) -> list[str]:
    """The tasks of `episodes` (demonstrations included), by name."""
    return sorted({row.task for row in episodes})


@dataclass(frozen=True)
class Curves:
    series: list[CurveSeries]  # one per robot (by id), one per task (by name) when they are several, then POOLED
    demo_end: CurvePoint | None  # where the last demonstration ended; None without demonstrations
    window: int  # episodes each point is taken over


def curves(episodes: Sequence[EpisodeRow], window: int = RECENT_EPISODES, *, pooled_when_empty: bool = False) -> Curves:
    """The recent-window figures after each online episode of `episodes` (oldest first), per robot, per task when
    the episodes are of two or more tasks (demonstrations included: see `tasks_of`; one task: no series for it, it
    would repeat the pooled one) and pooled. Without online episodes the pooled series is left out (the report:
    nothing learned to draw) unless `pooled_when_empty` (learning_curve.png: an empty line, named in its legend)."""
    recent = RecentEpisodes(window)
    robots: dict[str, CurveSeries] = {}
    several = len(tasks_of(episodes)) > 1
    tasks: dict[str, CurveSeries] = {}
    pooled = CurveSeries(POOLED)
    demo_end: CurvePoint | None = None
    for row in episodes:
        at = CurvePoint(row.env_steps, row.elapsed_s)
        if not recent.add(row.outcome()):  # a demonstration
            if demo_end is None or at.env_steps >= demo_end.env_steps:
                demo_end = at
            continue
        pooled.add(at, _added(recent.pooled()))
        robots.setdefault(row.robot_id, CurveSeries(row.robot_id)).add(at, recent.robots()[row.robot_id])
        if several:
            task = tasks.setdefault(row.task, CurveSeries(task_label(row.task), task=row.task))
            task.add(at, recent.tasks()[row.task])
    series = [robots[r] for r in sorted(robots)] + [tasks[t] for t in sorted(tasks)]
    series += [pooled] if pooled.at or pooled_when_empty else []
    return Curves(series, demo_end, window)


def _added(stats: WindowStats | None) -> WindowStats:
    assert stats is not None  # an online episode was just added to this window
    return stats
