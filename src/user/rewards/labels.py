"""Labelled frames for the success classifier, from the episodes of a replay buffer.

Labelling (per episode, ordered by step; the frame of a transition is its next observation's image):
- positive: the steps of a successful episode from its first `success` transition on, at most `positive_tail`
  of them;
- negative: every step of an unsuccessful episode, and the steps of a successful episode that lie more than
  `margin` steps before its first positive step (the steps just before success look nearly the same and are
  left out rather than labelled either way).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from user.buffer.replay import ReplayBuffer
from user.buffer.rows import TransitionQuery
from user.config import setting
from user.interfaces.domain import Transition
from user.interfaces.images import decode_image
from user.rewards.base import RewardError


@dataclass(frozen=True)
class LabelConfig:
    """How buffer episodes become labelled frames."""

    camera: str = setting("front", "camera whose frames are labelled")
    positive_tail: int = setting(5, "most frames per successful episode labelled positive", min=1)
    margin: int = setting(5, "steps before the first positive frame left unlabelled", min=0)
    task: str | None = setting(None, "only this task's episodes; null = all")


def label_episode(episode: Sequence[Transition], cfg: LabelConfig) -> list[tuple[int, bool]]:
    """(index into `episode`, label) for the frames of one episode ordered by step."""
    n = len(episode)
    flagged = [i for i, t in enumerate(episode) if t.success]
    if not flagged:
        return [(i, False) for i in range(n)]
    first = flagged[0]
    positives = [(i, True) for i in range(first, min(n, first + cfg.positive_tail))]
    negatives = [(i, False) for i in range(max(0, first - cfg.margin))]
    return negatives + positives


def _frame(t: Transition, camera: str) -> npt.NDArray[np.uint8] | None:
    for img in t.next_observation.images:
        if img.camera == camera:
            frame: npt.NDArray[np.uint8] = decode_image(img.data)
            return frame
    return None


def buffer_frames(directory: str | Path, cfg: LabelConfig) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Labelled frames of every episode in the buffer at `directory` (opened read-only)."""
    with ReplayBuffer.open(directory, read_only=True) as buffer:
        rows = buffer.query(TransitionQuery(task=cfg.task))
        episodes: dict[tuple[str, int], list[Transition]] = defaultdict(list)
        for start in range(0, len(rows), 512):
            for t in buffer.get(rows[start : start + 512]):
                episodes[(t.robot_id, t.episode_id)].append(t)
    frames: list[npt.NDArray[np.uint8]] = []
    labels: list[bool] = []
    for episode in episodes.values():
        episode.sort(key=lambda t: t.step)
        for i, label in label_episode(episode, cfg):
            frame = _frame(episode[i], cfg.camera)
            if frame is not None:
                frames.append(frame)
                labels.append(label)
    if not frames:
        raise RewardError(f"{directory}: no frames from camera {cfg.camera!r} in the buffer")
    return np.stack(frames), np.asarray(labels, dtype=np.bool_)
