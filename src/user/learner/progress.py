"""A run's progress on disk: `progress.csv` (one row per stats period), `episodes.csv` (one row per stored
episode; the columns of both are `user.learner.run_log`'s), TensorBoard event files under `tensorboard/` (unless
`tensorboard=False`), and `learning_curve.png` (see `user.learner.curve`), redrawn every `plot_every_s` (inf: only
at close) on a thread of its own (a redraw takes seconds, and `write` runs on the node's stats timer, under the
lock every callback of the node takes: drawn there, it held every robot's transitions and receipts that long) and
at close. TensorBoard and matplotlib are optional: without them the CSVs are still written and the reason is
logged once. None of these outputs can stop a run: a write that fails (a full disk, TensorBoard's writer thread
dead) is logged once per output until it works again, never raised, and a broken TensorBoard writer is opened
anew at the next write.

Steps are never ambiguous: `env_steps` counts transitions received from robots, `gradient_steps` the
optimiser steps, `update_calls` the algorithm's update calls (each of `gradient_steps_per_update` steps).
TensorBoard's step axis is `env_steps`. The episode figures (`recent_*`, `last_return`) are over the latest
RECENT_EPISODES online episodes of all robots (demonstrations left out, see `user.buffer.episode_window`);
TensorBoard has them pooled and per robot (`episodes/pooled/<figure>`, `episodes/robot/<id>/<figure>`; see
`user.learner.progress_scalars`), and episodes.csv has every episode of every robot, with its task.

One policy trained on several tasks: once the stored episodes (demonstrations included, a resumed run's counted
from its buffer) are of two or more tasks, each task's recent window is in TensorBoard too
(`episodes/task/<name>/<figure>`) and `task_figures` gives them for the learner to publish; with one task
nothing more is written (it would repeat the pooled window).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from user.buffer.episode_window import (
    RECENT_EPISODES,
    EpisodeOutcome,
    RecentEpisodes,
    WindowStats,
    episode_counts,
    latest_outcome,
    recent_outcomes,
    stored_tasks,
)
from user.buffer.errors import BufferError
from user.buffer.index import Index
from user.learner.checkpoint import LearnerCounters
from user.learner.csv_log import CsvLog
from user.learner.curve import draw
from user.learner.progress_scalars import window_prefixes, write_progress, write_windows
from user.learner.run_log import (
    EPISODE_COLUMNS,
    EPISODES_CSV,
    PROGRESS_COLUMNS,
    PROGRESS_CSV,
    PROGRESS_RENAMED,
    curves,
    read_episodes,
    read_progress,
    started_at,
)
from user.learner.trainer import TrainerCounters

_log = logging.getLogger("user.learner.progress")

_WINDOW_COLUMNS = {  # progress.csv column / TensorBoard name -> the window's figure
    "recent_return_mean": "mean_return",
    "last_return": "last_return",
    "recent_length_mean": "mean_length",
    "recent_online_success_rate": "success_rate",
    "recent_interventions_mean": "mean_interventions",
}


def _preload_matplotlib() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot
    except Exception as exc:  # reported when a plot is drawn
        _log.debug("matplotlib not available: %s", exc)


class ProgressLog:
    """Appends progress and episode rows; resumable (a resumed run appends to the same files, its `elapsed_s`
    going on from the last row's). `index`: the run's buffer index, whose stored online episodes fill the recent
    windows (a resumed run shows them at once) and whose newest episode `episode_stored` writes. `clock`: the
    monotonic clock `elapsed_s` is measured with."""

    def __init__(
        self,
        run_dir: Path,
        plot_every_s: float = 30.0,
        index: Index | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        tensorboard: bool = True,
    ) -> None:
        self.run_dir = run_dir
        self._index = index
        self.path = run_dir / PROGRESS_CSV
        self.episodes_path = run_dir / EPISODES_CSV
        before = read_progress(run_dir).rows  # the whole rows of the earlier starts of this run
        start = started_at(before)
        self.run_start = time.time() if start is None else start
        self._elapsed_before = before[-1].elapsed_s if before else 0.0  # how long the earlier starts ran
        self._csv = CsvLog(self.path, PROGRESS_COLUMNS, PROGRESS_RENAMED)
        self._episodes = CsvLog(self.episodes_path, EPISODE_COLUMNS)
        self._recent = RecentEpisodes(RECENT_EPISODES, recent_outcomes(index) if index is not None else ())
        self._counts = {r: list(n) for r, n in (episode_counts(index) if index is not None else {}).items()}
        self._tasks = stored_tasks(index) if index is not None else set()  # of every stored episode
        self._lock = threading.Lock()  # episodes arrive on bus threads, rows are written on the report thread
        self._clock = clock
        self._started = clock()
        self._plot_every_s = plot_every_s
        self._last_plot = time.monotonic()
        self._plot_due = threading.Event()  # `write` asks the plotter thread for a redraw
        self._plot_lock = threading.Lock()  # one redraw at a time (the plotter's, or the final one at close)
        self._closing = False
        self._plotter = threading.Thread(target=self._plot_loop, name="progress-plot", daemon=True)
        self._plotter.start()
        self._outcomes: deque[tuple[int, int]] = deque()  # (episodes, successes) at each row, for the recent rate
        self._tb: Any = None
        self._tb_broken = False  # its last write failed: open a new writer (a new event file) before the next
        self._failing: set[str] = set()  # outputs whose last write failed (logged once until they work again)
        # matplotlib takes a second or more to import on a busy machine; do it now, off the node's threads, so
        # drawing the final curve at shutdown stays well inside the node's shutdown deadline
        threading.Thread(target=_preload_matplotlib, name="progress-preload", daemon=True).start()
        try:
            self._tb = self._open_tensorboard() if tensorboard else None
        except Exception as exc:  # tensorboard not installed: CSV and PNG only
            _log.warning("no TensorBoard logs: %s", exc)

    def _open_tensorboard(self) -> Any:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(str(self.run_dir / "tensorboard"))

    def _guarded(self, what: str, write: Callable[[], object]) -> bool:
        """Run one output's write; a failure is logged once (until the output works again), never raised."""
        try:
            write()
        except Exception as exc:
            if what not in self._failing:
                self._failing.add(what)
                _log.error(
                    "%s not written (%s: %s); the run goes on, and the next write tries again",
                    what,
                    type(exc).__name__,
                    exc,
                )
            return False
        if what in self._failing:
            self._failing.discard(what)
            _log.warning("%s written again", what)
        return True

    def _write_tensorboard(self, write: Callable[[], object]) -> None:
        if self._tb_broken:
            with contextlib.suppress(Exception):
                self._tb.close()
            self._tb = self._open_tensorboard()
            self._tb_broken = False
        write()

    def episode_stored(self, env_steps: int) -> None:
        """The index's newest episode, just stored, into the progress files (`env_steps`: this one included).
        A failure is logged, never raised: the episode is stored, only its progress row is missing."""
        try:
            outcome = latest_outcome(self._index) if self._index is not None else None
        except (BufferError, OSError, ValueError) as exc:
            _log.warning("episode stored, but not read back for %s: %s", self.episodes_path, exc)
            return
        if outcome is not None:
            self._guarded(str(self.episodes_path), lambda: self.episode(outcome, env_steps))

    def episode(self, outcome: EpisodeOutcome, env_steps: int, wall: float | None = None) -> None:
        """One stored episode: a row of episodes.csv, and into the recent windows unless a demonstration.
        `env_steps`: transitions received so far, this episode's included."""
        wall = time.time() if wall is None else wall
        with self._lock:
            self._recent.add(outcome)
            self._counts.setdefault(outcome.robot_id, [0, 0])[int(outcome.is_demo)] += 1
            self._tasks.add(outcome.task)
            self._episodes.append(
                {
                    "wall_time": f"{wall:.3f}",
                    "elapsed_s": f"{wall - self.run_start:.3f}",
                    "env_steps": env_steps,
                    "robot_id": outcome.robot_id,
                    "task": outcome.task,
                    "episode_id": outcome.episode_id,
                    "steps": outcome.steps,
                    "episode_return": repr(float(outcome.episode_return)),
                    "success": int(outcome.success),
                    "interventions": outcome.interventions,
                    "is_demo": int(outcome.is_demo),
                }
            )

    def recent(self) -> tuple[WindowStats | None, dict[str, WindowStats]]:
        """The latest online episodes of all robots (None before the first) and of each robot."""
        with self._lock:
            return self._recent.pooled(), self._recent.robots()

    def task_figures(self) -> dict[str, WindowStats]:
        """Each task's latest online episodes (all its robots'), by task name, once the stored episodes are of two
        or more tasks; empty before (one task's window is the pooled one) and for a task with no online episode
        yet."""
        with self._lock:
            return self._recent.tasks() if len(self._tasks) > 1 else {}

    def recent_values(self) -> dict[str, float]:
        """The pooled window as named values (for the stats message); empty before the first online episode."""
        pooled, _ = self.recent()
        if pooled is None:
            return {}
        return {column: float(getattr(pooled, name)) for column, name in _WINDOW_COLUMNS.items()}

    def episode_counts(self) -> dict[str, float]:
        """Each robot's stored episodes over the whole run (a resumed run's included) as named values for the
        stats message: `episodes/<robot>` acted by a policy, `demos/<robot>` demonstrations."""
        with self._lock:
            counts = {robot: tuple(n) for robot, n in self._counts.items()}
        return {
            **{f"episodes/{robot}": float(online) for robot, (online, _) in counts.items()},
            **{f"demos/{robot}": float(demos) for robot, (_, demos) in counts.items()},
        }

    def recent_success_rate(self, counters: LearnerCounters) -> float:
        """Success over roughly the latest RECENT_EPISODES episodes (from the counters' history)."""
        self._outcomes.append((counters.episodes, counters.successes))
        while len(self._outcomes) > 1 and counters.episodes - self._outcomes[1][0] >= RECENT_EPISODES:
            self._outcomes.popleft()
        episodes0, successes0 = self._outcomes[0]
        n = counters.episodes - episodes0
        return (counters.successes - successes0) / n if n > 0 else 0.0

    def write(
        self, wall: float, trainer: TrainerCounters, counters: LearnerCounters, buffered: int, rate: float
    ) -> float:
        """One row (`rate`: gradient steps per second); returns the recent success rate."""
        recent = self.recent_success_rate(counters)
        total = trainer.busy_s + trainer.idle_s
        idle = trainer.idle_s / total if total > 0 else 1.0
        pooled, robots = self.recent()
        windows = window_prefixes(pooled, robots, self.task_figures())
        row: dict[str, object] = {
            "wall_time": f"{wall:.3f}",
            "elapsed_s": f"{self._elapsed_before + self._clock() - self._started:.3f}",
            "env_steps": counters.env_steps,
            "episodes": counters.episodes,
            "successes": counters.successes,
            "recent_success_rate": f"{recent:.4f}",
            "update_calls": trainer.update_calls,
            "gradient_steps": trainer.gradient_steps,
            "gradient_steps_per_s": f"{rate:.3f}",
            "policy_version": counters.policy_version,
            "buffer_transitions": buffered,
            "idle_fraction": f"{idle:.4f}",
            "buffer_wait_fraction": f"{trainer.feed_wait_s / total if total > 0 else 0.0:.4f}",
        }
        if pooled is not None:
            row.update({column: f"{getattr(pooled, name):.6g}" for column, name in _WINDOW_COLUMNS.items()})
        with self._lock:
            self._guarded(str(self.path), lambda: self._csv.append(row))
        if self._tb is not None:

            def tensorboard() -> None:
                step = counters.env_steps
                write_progress(
                    self._tb, step, recent=recent, rate=rate, trainer=trainer, counters=counters, buffered=buffered
                )
                write_windows(self._tb, step, windows)

            self._tb_broken = not self._guarded("TensorBoard", lambda: self._write_tensorboard(tensorboard))
        if time.monotonic() - self._last_plot >= self._plot_every_s:
            self._last_plot = time.monotonic()
            self._plot_due.set()  # drawn on the plotter thread, not on the caller's
        return recent

    def _plot_loop(self) -> None:
        """The plotter thread: one redraw per request, until close."""
        while True:
            self._plot_due.wait()
            self._plot_due.clear()
            if self._closing:
                return
            with self._plot_lock:
                self._guarded("learning_curve.png", self.plot)

    def plot(self) -> Path | None:
        """Redraw learning_curve.png from episodes.csv and progress.csv; None (logged) without matplotlib."""
        self._last_plot = time.monotonic()
        progress = read_progress(self.run_dir).rows
        drawn = curves(read_episodes(self.run_dir).rows, RECENT_EPISODES, pooled_when_empty=True)
        if not progress and not drawn.series[-1].at:
            return None
        return draw(drawn, progress, self.run_start, self.run_dir / "learning_curve.png", self.run_dir.name)

    def close(self) -> None:
        """The final curve, then every file closed; what fails is logged (a full disk must not fail the stop)."""
        self._closing = True
        self._plot_due.set()
        with self._plot_lock:  # a redraw in progress ends first
            self._guarded("learning_curve.png", self.plot)
        self._guarded(str(self.path), self._csv.close)
        self._guarded(str(self.episodes_path), self._episodes.close)
        if self._tb is not None:
            self._guarded("TensorBoard", self._tb.close)
