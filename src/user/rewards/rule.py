"""Rule-based reward: distance of the tool to a target pose, with success thresholds.

Dense form: `1 - tanh(d / scale)` with `d = position error (m) + rotation_weight * rotation error (rad)`;
sparse form: 1 on success, else 0. Success: position error <= `position_tolerance_m` and (when a target
orientation is given) rotation error <= `rotation_tolerance_rad`. In terminal mode only the last step of an
episode is scored (0 elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.config import setting
from user.rewards.base import RewardError, RewardMode, RewardStep, RewardValue


@dataclass(frozen=True)
class RuleRewardConfig:
    """Distance-to-target-pose reward."""

    target_position: tuple[float, float, float] = setting((0.5, 0.0, 0.2), "target tool position, base frame, m")
    target_orientation: tuple[float, float, float, float] | None = setting(
        None, "target tool orientation, xyzw quaternion; null = orientation is not scored"
    )
    position_tolerance_m: float = setting(0.01, "success when the position error is at most this, m", min=0.0)
    rotation_tolerance_rad: float = setting(0.1, "success also needs a rotation error at most this, rad", min=0.0)
    rotation_weight: float = setting(0.1, "metres of distance one radian of rotation error counts as", min=0.0)
    scale: float = setting(0.05, "distance at which the dense reward falls to 1 - tanh(1), m", min=1e-6)
    dense: bool = setting(True, "dense 1 - tanh(d / scale) (true) or 1 on success else 0 (false)")
    success_bonus: float = setting(0.0, "added to the reward on success", min=0.0)
    mode: str = setting(
        "step", "step: score every step; terminal: score only an episode's last step", choices=("step", "terminal")
    )

    def __post_init__(self) -> None:
        if self.target_orientation is not None and np.linalg.norm(self.target_orientation) < 1e-9:
            raise RewardError("target_orientation must be a non-zero quaternion")


def rotation_error(q: npt.NDArray[np.float64], target: npt.NDArray[np.float64]) -> float:
    """Angle (rad, in [0, pi]) between two xyzw orientations, sign of the quaternions ignored."""
    a, b = q / np.linalg.norm(q), target / np.linalg.norm(target)
    dot = min(1.0, abs(float(np.dot(a, b))))
    return 2.0 * float(np.arccos(dot))


class RuleReward:
    """Scores the tool pose in each step's state against a fixed target pose."""

    needs_images = False

    def __init__(self, config: RuleRewardConfig | None = None) -> None:
        self.config = config or RuleRewardConfig()
        self.mode = RewardMode(self.config.mode)
        self._target = np.asarray(self.config.target_position, dtype=np.float64)
        q = self.config.target_orientation
        self._target_q = None if q is None else np.asarray(q, dtype=np.float64)

    def errors(self, tcp_pose: npt.NDArray[np.float64]) -> tuple[float, float]:
        """(position error m, rotation error rad; 0 when the orientation is not scored)."""
        pos = float(np.linalg.norm(tcp_pose[:3] - self._target))
        rot = 0.0 if self._target_q is None else rotation_error(tcp_pose[3:7], self._target_q)
        return pos, rot

    def __call__(self, step: RewardStep) -> RewardValue:
        c = self.config
        pos, rot = self.errors(step.tcp_pose)
        success = pos <= c.position_tolerance_m and (self._target_q is None or rot <= c.rotation_tolerance_rad)
        if self.mode is RewardMode.TERMINAL and not step.last:
            return RewardValue(0.0, success)
        base = 1.0 - float(np.tanh((pos + c.rotation_weight * rot) / c.scale)) if c.dense else float(success)
        return RewardValue(base + (c.success_bonus if success else 0.0), success)

    def reset(self) -> None:
        """Stateless."""
