"""A run's progress on disk: `progress.csv` (one row per stats period), TensorBoard event files under
`tensorboard/`, and `learning_curve.png` (success rate and update rate against wall time), redrawn every
`plot_every_s` and at close. TensorBoard and matplotlib are optional: without them the CSV is still written
and the reason is logged once."""

from __future__ import annotations

import csv
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from user.learner.checkpoint import LearnerCounters
from user.learner.trainer import TrainerCounters

_log = logging.getLogger("user.learner.progress")

COLUMNS = (
    "wall_time",
    "elapsed_s",
    "env_steps",
    "episodes",
    "successes",
    "recent_success_rate",
    "update_calls",
    "gradient_steps",
    "updates_per_s",
    "policy_version",
    "buffer_transitions",
    "idle_fraction",
)
RECENT_EPISODES = 20  # the success rate shown is over this many latest episodes


def _preload_matplotlib() -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot
    except Exception as exc:  # reported when a plot is drawn
        _log.debug("matplotlib not available: %s", exc)


class ProgressLog:
    """Appends progress rows; resumable (a resumed run appends to the same files)."""

    def __init__(self, run_dir: Path, plot_every_s: float = 30.0) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "progress.csv"
        new = not self.path.exists()
        self._file = open(self.path, "a", newline="", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(COLUMNS)
        self._started = time.monotonic()
        self._plot_every_s = plot_every_s
        self._last_plot = time.monotonic()
        self._outcomes: deque[tuple[int, int]] = deque()  # (episodes, successes) at each row, for the recent rate
        self._tb: Any = None
        # matplotlib takes a second or more to import on a busy machine; do it now, off the node's threads, so
        # drawing the final curve at shutdown stays well inside the node's shutdown deadline
        threading.Thread(target=_preload_matplotlib, name="progress-preload", daemon=True).start()
        try:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tensorboard"))
        except Exception as exc:  # tensorboard not installed: CSV and PNG only
            _log.warning("no TensorBoard logs: %s", exc)

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
        """One row; returns the recent success rate."""
        recent = self.recent_success_rate(counters)
        total = trainer.busy_s + trainer.idle_s
        idle = trainer.idle_s / total if total > 0 else 1.0
        row = (
            f"{wall:.3f}",
            f"{time.monotonic() - self._started:.3f}",
            counters.env_steps,
            counters.episodes,
            counters.successes,
            f"{recent:.4f}",
            trainer.update_calls,
            trainer.gradient_steps,
            f"{rate:.3f}",
            counters.policy_version,
            buffered,
            f"{idle:.4f}",
        )
        self._csv.writerow(row)
        self._file.flush()
        if self._tb is not None:
            step = counters.env_steps
            self._tb.add_scalar("progress/recent_success_rate", recent, step)
            self._tb.add_scalar("progress/updates_per_s", rate, step)
            self._tb.add_scalar("progress/policy_version", counters.policy_version, step)
            self._tb.add_scalar("progress/buffer_transitions", buffered, step)
            for key, value in trainer.last.items():
                self._tb.add_scalar(f"train/{key}", value, step)
        if time.monotonic() - self._last_plot >= self._plot_every_s:
            self.plot()
        return recent

    def plot(self) -> Path | None:
        """Redraw learning_curve.png from progress.csv; None (logged) when matplotlib is missing."""
        self._last_plot = time.monotonic()
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except Exception as exc:
            _log.warning("no learning-curve PNG: %s", exc)
            return None
        with open(self.path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r.get("env_steps")]
        if not rows:
            return None
        steps = [int(r["env_steps"]) for r in rows]
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
        ax1.plot(steps, [float(r["recent_success_rate"]) for r in rows])
        ax1.set_ylabel(f"success (last {RECENT_EPISODES} ep.)")
        ax1.set_ylim(-0.02, 1.02)
        ax2.plot(steps, [float(r["updates_per_s"]) for r in rows])
        ax2.set_ylabel("gradient steps / s")
        ax2.set_xlabel("environment steps")
        fig.suptitle(self.run_dir.name)
        fig.tight_layout()
        out = self.run_dir / "learning_curve.png"
        fig.savefig(out, dpi=80)
        plt.close(fig)
        return out

    def close(self) -> None:
        try:
            self.plot()
        finally:
            self._file.close()
            if self._tb is not None:
                self._tb.close()
