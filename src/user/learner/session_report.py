"""What a learning session reports: the named values of its stats message, and how good the run is (what
`stop_after.success_rate` reads). A learner training one policy on several tasks (`learning.tasks`) adds each
task's share of the next batch and recent success, and is judged by its worst task."""

from __future__ import annotations

from user.buffer.episode_window import WindowStats
from user.buffer.replay import ReplayBuffer
from user.buffer.task_sampler import TaskBalancedSampler
from user.learner.checkpoint import LearnerCounters
from user.learner.progress import ProgressLog
from user.learner.task_condition import TaskConditioner
from user.learner.trainer import Trainer, TrainerCounters


def ratio_reached(gradient_steps: int, env_steps: int) -> float:
    """The update-to-data ratio so far: gradient steps per transition received (0 before any)."""
    return gradient_steps / env_steps if env_steps else 0.0


def stats_values(
    c: TrainerCounters,
    counters: LearnerCounters,
    trainer: Trainer,
    progress: ProgressLog,
    buffer: ReplayBuffer,
    *,
    halted: bool,
    updates_per_step: float,
) -> dict[str, float]:
    """The named values of one stats message (`c`, `counters`: the snapshot the progress row is written from)."""
    return {
        **c.last,
        "update_calls": float(c.update_calls),
        "episodes": float(counters.episodes),
        "successes": float(counters.successes),
        "idle_fraction": trainer.idle_fraction(),
        "buffer_wait_fraction": trainer.feed_wait_fraction(),
        "publishing_halted": float(halted),
        "updates_per_step_reached": ratio_reached(c.gradient_steps, counters.env_steps),
        "updates_per_step_set": updates_per_step,  # the monitor says when the learner lags
        **progress.recent_values(),  # return, length, success, interventions of recent online episodes
        **progress.episode_counts(),  # per robot, over the whole run (a monitor's counts go on from them)
        **task_values(buffer, progress.task_figures()),  # several tasks: each one's share and success
    }


def run_success(progress: ProgressLog, conditioner: TaskConditioner | None) -> tuple[float | None, int]:
    """The success rate of the recent online episodes (the progress window) and how many it holds; a policy
    conditioned on several tasks: its worst task's (`worst_task`)."""
    if conditioner is not None:
        return worst_task(conditioner.tasks, progress.task_figures())
    pooled, _ = progress.recent()
    return (None, 0) if pooled is None else (pooled.success_rate, pooled.episodes)


def task_values(buffer: ReplayBuffer, windows: dict[str, WindowStats]) -> dict[str, float]:
    """The stats values of several tasks: `task_share/<task>` (task-balanced sampling: its share of the next batch)
    and `task_success/<task>` (its recent online success); nothing for one task."""
    values = {f"task_success/{task}": w.success_rate for task, w in windows.items()}
    sampler = buffer.sampler
    if isinstance(sampler, TaskBalancedSampler):
        shares = sampler.shares(buffer.storage.view())
        values.update({f"task_share/{task}": share for task, share in shares.items()})
    return values


def worst_task(tasks: tuple[str, ...], windows: dict[str, WindowStats]) -> tuple[float | None, int]:
    """A policy conditioned on `tasks` is as good as its worst: the lowest task's recent success rate, and the fewest
    episodes of any task's window (None and 0 while a task has none)."""
    if any(task not in windows for task in tasks):
        return None, 0
    mine = [windows[task] for task in tasks]
    return min(w.success_rate for w in mine), min(w.episodes for w in mine)
