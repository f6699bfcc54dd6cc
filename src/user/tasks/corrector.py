"""A scripted corrector: the simulated stand-in for a person who watches the arm and grabs the SpaceMouse.

It follows HG-DAgger's gate (Kelly et al. 2019): the person takes over when the robot strays from where the expert
would take it and hands back once it is close again. Here "where the expert would take it" is the task's expert
path (`Task.expert_path`): the line from the steered point's place at the episode's first observation through the
expert's waypoints. The corrector takes over when the point is farther than `takeover_m` from that line and hands
back when it is nearer than `handback_m` (hysteresis: `handback_m` < `takeover_m`, so it does not flicker at the
edge). While it is in control, the expert's action is what the robot executes, marked as an intervention.
"""

from __future__ import annotations

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

    def __post_init__(self) -> None:
        if self.handback_m >= self.takeover_m:
            raise TaskError(
                f"corrector: handback_m ({self.handback_m}) must be below takeover_m ({self.takeover_m}), or it "
                "would take over and hand back at the same distance"
            )


def distance_to_path(point: Vec, path: Vec) -> float:
    """Distance (m) from `point` (3,) to the polyline through the (N, 3) `path` (N >= 1)."""
    p = np.asarray(point, dtype=np.float64)
    line = np.asarray(path, dtype=np.float64)
    if p.shape != (3,) or line.ndim != 2 or line.shape[1] != 3 or len(line) == 0:
        raise TaskError(f"a path distance needs a (3,) point and an (N, 3) path, got {p.shape} and {line.shape}")
    if not (np.isfinite(p).all() and np.isfinite(line).all()):
        raise TaskError("a path distance needs finite coordinates")
    if len(line) == 1:
        return float(np.linalg.norm(p - line[0]))
    start, end = line[:-1], line[1:]
    along = end - start
    length2 = np.einsum("ij,ij->i", along, along)
    t = np.where(length2 > 0.0, np.einsum("ij,ij->i", p - start, along) / np.maximum(length2, 1e-18), 0.0)
    nearest = start + np.clip(t, 0.0, 1.0)[:, None] * along
    return float(np.min(np.linalg.norm(nearest - p, axis=1)))


class Corrector:
    """Decides, observation by observation, whether the corrector is in control of one robot."""

    def __init__(self, config: CorrectorConfig) -> None:
        self.config = config
        self.takeovers = 0  # times it took over
        self._episode: int | None = None
        self._anchor: Vec | None = None  # where the steered point was at the episode's first observation seen
        self._in_control = False

    @property
    def in_control(self) -> bool:
        return self._in_control

    def decide(self, episode_id: int, path: ExpertPath) -> tuple[bool, float]:
        """Whether the corrector acts at this observation of `episode_id`, and the point's distance from the path.

        The path is anchored at the point's place in the first observation of each episode (a new episode hands
        back first)."""
        anchor = self._anchor
        if episode_id != self._episode or anchor is None:
            self._episode = episode_id
            anchor = self._anchor = np.asarray(path.point, dtype=np.float64).copy()
            self._in_control = False
        line = np.vstack([anchor[None, :], np.asarray(path.waypoints, dtype=np.float64)])
        distance = distance_to_path(path.point, line)
        if self._in_control and distance < self.config.handback_m:
            self._in_control = False
        elif not self._in_control and distance > self.config.takeover_m:
            self._in_control = True
            self.takeovers += 1
        return self._in_control, distance
