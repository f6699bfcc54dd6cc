"""A run's CSV files as typed rows: `episodes.csv` (one row per stored episode) and `progress.csv` (one row per
learner stats period), as `user.learner.progress` writes them.

A row that cannot be read is not fatal: `read_table` keeps the rows it can read and says, for each one it cannot,
which file, line and column was wrong (`MalformedRowError`'s message). The last line of a run killed while writing
is such a row."""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from user.report.errors import MalformedRowError

# progress.csv written by older versions named a column differently (user.learner.progress RENAMED)
PROGRESS_RENAMED = {"updates_per_s": "gradient_steps_per_s"}

Row = Mapping[str, "str | None"]
T = TypeVar("T")


@dataclass(frozen=True)
class EpisodeRow:
    """One row of episodes.csv."""

    wall_time: float  # seconds since the epoch when the learner stored the episode
    elapsed_s: float  # since the run first started
    env_steps: int  # transitions the learner had received, this episode's included
    robot_id: str
    episode_id: int
    steps: int  # transitions in the episode
    episode_return: float
    success: bool
    interventions: int  # steps in which a human overrode the policy
    is_demo: bool


@dataclass(frozen=True)
class ProgressRow:
    """One row of progress.csv (the figures a report draws; the recent-window ones are empty early on)."""

    wall_time: float
    elapsed_s: float  # the learner's running time over all starts of the run (continued on resume)
    env_steps: int
    episodes: int
    successes: int
    update_calls: int
    gradient_steps: int
    gradient_steps_per_s: float
    policy_version: int
    buffer_transitions: int
    idle_fraction: float | None  # the learner's time waiting for an allowed batch / its time; None: not recorded
    recent_return_mean: float | None
    recent_online_success_rate: float | None


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


def parse_episode(row: Row, where: str) -> EpisodeRow:
    """One episodes.csv row; MalformedRowError naming `where` ('episodes.csv line 7') and the column."""
    c = _Cells(row, where)
    return EpisodeRow(
        wall_time=c.real("wall_time"),
        elapsed_s=c.real("elapsed_s"),
        env_steps=c.integer("env_steps"),
        robot_id=c.text("robot_id"),
        episode_id=c.integer("episode_id"),
        steps=c.integer("steps"),
        episode_return=c.real("episode_return"),
        success=c.flag("success"),
        interventions=c.integer("interventions"),
        is_demo=c.flag("is_demo"),
    )


def parse_progress(row: Row, where: str) -> ProgressRow:
    """One progress.csv row; MalformedRowError naming `where` and the column."""
    c = _Cells({PROGRESS_RENAMED.get(k, k): v for k, v in row.items()}, where)
    return ProgressRow(
        wall_time=c.real("wall_time"),
        elapsed_s=c.real("elapsed_s"),
        env_steps=c.integer("env_steps"),
        episodes=c.integer("episodes"),
        successes=c.integer("successes"),
        update_calls=c.integer("update_calls"),
        gradient_steps=c.integer("gradient_steps"),
        gradient_steps_per_s=c.real("gradient_steps_per_s"),
        policy_version=c.integer("policy_version"),
        buffer_transitions=c.integer("buffer_transitions"),
        idle_fraction=c.optional("idle_fraction"),
        recent_return_mean=c.optional("recent_return_mean"),
        recent_online_success_rate=c.optional("recent_online_success_rate"),
    )


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
    return read_table(run_dir / "episodes.csv", parse_episode)


def read_progress(run_dir: Path) -> Table[ProgressRow]:
    return read_table(run_dir / "progress.csv", parse_progress)
