"""A scripted corrector: the simulated stand-in for a person who watches the arm and grabs the SpaceMouse.

It follows HG-DAgger's gate (Kelly et al. 2019): the person takes over when the robot goes wrong and hands back once
it is fine again. Here "going wrong" is judged against the task's expert path (`Task.expert_path`): the line from
the steered point's place at the episode's first observation through the expert's waypoints, in two ways:

- straying: the point is farther than `takeover_m` from the line; the corrector hands back when it is nearer than
  `handback_m` again (hysteresis: `handback_m` < `takeover_m`, so it does not flicker at the edge);
- stalling: the point has not got `stall_progress_m` further along the line (its nearest place on it, measured
  from the start) within `stall_steps` observations, as when an arm hovers over the hole without going in; the
  corrector hands back once the point is `resume_m` further along (or at the line's end) and within `handback_m`.

While it is in control, the expert's action is what the robot executes, marked as an intervention.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.config import setting
from user.tasks.base import ExpertPath, TaskError

Vec = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CorrectorConfig:
    """When the scripted corrector takes over and hands back."""

    takeover_m: float = setting(0.03, "take over when the steered point is farther than this from the path, m", min=0.0)
    handback_m: float = setting(0.01, "hand back when it is nearer than this again, m", min=0.0)
    stall_steps: int = setting(
        20,
        "take over when the point got less than stall_progress_m along the path in this many steps; 0 = never",
        min=0,
    )
    stall_progress_m: float = setting(0.005, "progress along the path that is not a stall, m", min=0.0)
    resume_m: float = setting(0.02, "after a stall: hand back once the point is this much further along, m", min=0.0)

    def __post_init__(self) -> None:
        if self.handback_m >= self.takeover_m:
            raise TaskError(
                f"corrector: handback_m ({self.handback_m}) must be below takeover_m ({self.takeover_m}), or it "
                "would take over and hand back at the same distance"
            )


def locate(point: Vec, path: Vec) -> tuple[float, float]:
    """(distance, progress) of `point` (3,) from the polyline through the (N, 3) `path` (N >= 1): its distance to
    the nearest place on the line and how far along the line (from its first point) that place is, m."""
    p = np.asarray(point, dtype=np.float64)
    line = np.asarray(path, dtype=np.float64)
    if p.shape != (3,) or line.ndim != 2 or line.shape[1] != 3 or len(line) == 0:
        raise TaskError(f"a path distance needs a (3,) point and an (N, 3) path, got {p.shape} and {line.shape}")
    if not (np.isfinite(p).all() and np.isfinite(line).all()):
        raise TaskError("a path distance needs finite coordinates")
    if len(line) == 1:
        return float(np.linalg.norm(p - line[0])), 0.0
    start, end = line[:-1], line[1:]
    along = end - start
    length2 = np.einsum("ij,ij->i", along, along)
    t = np.where(length2 > 0.0, np.einsum("ij,ij->i", p - start, along) / np.maximum(length2, 1e-18), 0.0)
    t = np.clip(t, 0.0, 1.0)
    gaps = np.linalg.norm(start + t[:, None] * along - p, axis=1)
    nearest = int(np.argmin(gaps))
    lengths = np.sqrt(length2)
    return float(gaps[nearest]), float(lengths[:nearest].sum() + t[nearest] * lengths[nearest])


def distance_to_path(point: Vec, path: Vec) -> float:
    """Distance (m) from `point` (3,) to the polyline through the (N, 3) `path` (N >= 1)."""
    return locate(point, path)[0]


def path_length(path: Vec) -> float:
    """Length (m) of the polyline through the (N, 3) `path`."""
    line = np.asarray(path, dtype=np.float64)
    return float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum()) if len(line) > 1 else 0.0


class Corrector:
    """Decides, observation by observation, whether the corrector is in control of one robot."""

    def __init__(self, config: CorrectorConfig) -> None:
        self.config = config
        self.takeovers = 0  # times it took over (for straying or stalling)
        self.stalls = 0  # of those, for stalling
        self._episode: int | None = None
        self._anchor: Vec | None = None  # where the steered point was at the episode's first observation seen
        self._in_control = False
        self._resume_at: float | None = None  # after a stall take-over: the progress at which it hands back
        self._step: int | None = None  # the step of the last observation decided
        self._progress: deque[float] = deque(maxlen=max(config.stall_steps, 1))  # the last stall_steps' progress

    @property
    def in_control(self) -> bool:
        return self._in_control

    @property
    def stalled_now(self) -> bool:
        """In control because the point stalled (not because it strayed)."""
        return self._in_control and self._resume_at is not None

    def decide(self, episode_id: int, path: ExpertPath, step: int | None = None) -> tuple[bool, float]:
        """Whether the corrector acts at this observation of `episode_id`, and the point's distance from the path.

        The path is anchored at the point's place in the first observation of each episode (a new episode hands
        back first). An observation of the step decided last (a robot holding republishes it) counts once
        toward a stall."""
        anchor = self._anchor
        if episode_id != self._episode or anchor is None:
            self._episode = episode_id
            anchor = self._anchor = np.asarray(path.point, dtype=np.float64).copy()
            self._in_control, self._resume_at = False, None
            self._progress.clear()
            self._step = None
        line = np.vstack([anchor[None, :], np.asarray(path.waypoints, dtype=np.float64)])
        distance, progress = locate(path.point, line)
        if step is None or step != self._step:
            self._progress.append(progress)
        self._step = step
        c = self.config
        if self._in_control:
            resumed = self._resume_at is None or progress >= self._resume_at
            if resumed and distance < c.handback_m:
                self._in_control, self._resume_at = False, None
                self._progress.clear()
        elif distance > c.takeover_m:
            self._take_over()
        elif self._stalled():
            self._take_over()
            self.stalls += 1
            self._resume_at = min(progress + c.resume_m, path_length(line))
        return self._in_control, distance

    def _stalled(self) -> bool:
        window = self._progress
        if self.config.stall_steps == 0 or len(window) < self.config.stall_steps:
            return False
        return max(window) - window[0] < self.config.stall_progress_m

    def _take_over(self) -> None:
        self._in_control = True
        self.takeovers += 1
