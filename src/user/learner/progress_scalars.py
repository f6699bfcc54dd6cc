"""The scalars `user.learner.progress.ProgressLog` writes to TensorBoard, all at the step `env_steps` (transitions
received from robots): the learner's figures under `progress/`, its update's last values under `train/`, and the
recent windows of online episodes (`user.buffer.episode_window`) under `episodes/`: pooled over all robots
(`episodes/pooled/<figure>`), per robot (`episodes/robot/<id>/<figure>`) and, when one policy is trained on two
or more tasks, per task (`episodes/task/<name>/<figure>`). Kept apart from the CSV and PNG outputs so that what is
named how in TensorBoard is read in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from user.buffer.episode_window import WindowStats
from user.learner.checkpoint import LearnerCounters
from user.learner.trainer import TrainerCounters

WINDOW_TAGS = {  # a window's figure -> its name in TensorBoard
    "mean_return": "return_mean",
    "last_return": "last_return",
    "mean_length": "length_mean",
    "success_rate": "success_rate",
    "mean_interventions": "interventions_mean",
}


def write_progress(
    tb: Any,
    step: int,
    *,
    recent: float,
    rate: float,
    trainer: TrainerCounters,
    counters: LearnerCounters,
    buffered: int,
) -> None:
    """The learner's figures (`recent`: its recent success rate, `rate`: gradient steps per second)."""
    tb.add_scalar("progress/recent_success_rate", recent, step)
    tb.add_scalar("progress/gradient_steps_per_s", rate, step)
    tb.add_scalar("progress/gradient_steps", trainer.gradient_steps, step)
    tb.add_scalar("progress/episodes", counters.episodes, step)
    tb.add_scalar("progress/policy_version", counters.policy_version, step)
    tb.add_scalar("progress/buffer_transitions", buffered, step)
    for key, value in trainer.last.items():
        tb.add_scalar(f"train/{key}", value, step)


def window_prefixes(
    pooled: WindowStats | None, robots: Mapping[str, WindowStats], tasks: Mapping[str, WindowStats]
) -> dict[str, WindowStats]:
    """Each recent window by the prefix of its tags: per robot, per task (`tasks` is empty unless the episodes
    are of two or more tasks), then pooled (none before the first online episode)."""
    named = {f"episodes/robot/{robot}": stats for robot, stats in robots.items()}
    named.update({f"episodes/task/{task}": stats for task, stats in tasks.items()})
    if pooled is not None:
        named["episodes/pooled"] = pooled
    return named


def write_windows(tb: Any, step: int, windows: Mapping[str, WindowStats]) -> None:
    """Every figure of each window (by tag prefix, see `window_prefixes`)."""
    for prefix, stats in windows.items():
        for name, tag in WINDOW_TAGS.items():
            tb.add_scalar(f"{prefix}/{tag}", float(getattr(stats, name)), step)
