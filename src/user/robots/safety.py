"""The safety layer every Cartesian arm driver shares: pure maths, no I/O.

A normalised action `[dx, dy, dz, droll, dpitch, dyaw, gripper]` in [-1, 1] becomes a target pose:
each component is clipped to [-1, 1], the deltas are scaled by the per-step limits and added to the
*commanded* target (translation in the base frame, rotation as a base-frame rotation vector), the
position is kept inside the workspace box and the orientation within the allowed deviation from a
nominal orientation. The gripper component is absolute: -1 closed, +1 fully open, kept in the gripper
range. Bad data (wrong type, dtype or shape, NaN or inf) is rejected: the command holds the target.

A target that is already outside the workspace or orientation limit (a start pose set elsewhere) is
never pushed further out and never pulled in without being asked: only motion back inside is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.config.strict import ConfigError, setting
from user.robots import rotations
from user.robots.base import RobotError

ACTION_NAMES: tuple[str, ...] = ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")
ACTION_DIM = len(ACTION_NAMES)
Vec = npt.NDArray[np.float64]
_AXES = ("x", "y", "z")
_ROTATION_TOLERANCE = 1e-9


class SafetyError(RobotError):
    """The safety layer was given an impossible robot state (e.g. a NaN target pose): a driver bug."""


@dataclass(frozen=True)
class SafetyConfig:
    """Limits applied to every arm command. All positions in the robot base frame."""

    workspace_min: tuple[float, float, float] = setting(
        (0.25, -0.35, 0.02), "lowest corner (x, y, z, m) of the box the TCP target must stay in"
    )
    workspace_max: tuple[float, float, float] = setting(
        (0.75, 0.35, 0.55), "highest corner (x, y, z, m) of the box the TCP target must stay in"
    )
    max_translation_per_step_m: float = setting(
        0.02, "TCP target move along each base axis for an action component of +-1 (m per step)", min=1e-6, max=0.25
    )
    max_rotation_per_step_rad: float = setting(
        0.1, "TCP target rotation about each base axis for an action component of +-1 (rad per step)", min=1e-6, max=1.0
    )
    nominal_orientation: tuple[float, float, float, float] | None = setting(
        None, "orientation (xyzw quaternion, base frame) the deviation limit is measured from; null: no limit"
    )
    max_orientation_deviation_rad: float | None = setting(
        None, "largest rotation angle allowed between the target orientation and nominal_orientation (rad)"
    )
    gripper_min: float = setting(
        0.0, "smallest gripper opening that may be commanded (0 closed .. 1 open)", min=0.0, max=1.0
    )
    gripper_max: float = setting(
        1.0, "largest gripper opening that may be commanded (0 closed .. 1 open)", min=0.0, max=1.0
    )

    def __post_init__(self) -> None:
        for name in ("workspace_min", "workspace_max"):
            value = getattr(self, name)
            if len(value) != 3 or not all(math.isfinite(v) for v in value):
                raise ConfigError(f"{name} must be three finite numbers (x, y, z in m), got {value!r}")
        for axis, lo, hi in zip(_AXES, self.workspace_min, self.workspace_max, strict=True):
            if lo >= hi:
                raise ConfigError(f"workspace {axis}: workspace_min {lo} must be below workspace_max {hi}")
        _check_range("max_translation_per_step_m", self.max_translation_per_step_m, 1e-6, 0.25)
        _check_range("max_rotation_per_step_rad", self.max_rotation_per_step_rad, 1e-6, 1.0)
        _check_range("gripper_min", self.gripper_min, 0.0, 1.0)
        _check_range("gripper_max", self.gripper_max, 0.0, 1.0)
        if self.gripper_min > self.gripper_max:
            raise ConfigError(f"gripper_min {self.gripper_min} is above gripper_max {self.gripper_max}")
        if (self.nominal_orientation is None) != (self.max_orientation_deviation_rad is None):
            raise ConfigError("nominal_orientation and max_orientation_deviation_rad go together: set both or neither")
        if self.nominal_orientation is not None:
            try:
                rotations.normalize(self.nominal_orientation)
            except ValueError as exc:
                raise ConfigError(f"nominal_orientation: {exc}") from None
        if self.max_orientation_deviation_rad is not None:
            _check_range("max_orientation_deviation_rad", self.max_orientation_deviation_rad, 0.0, math.pi)


def _check_range(name: str, value: float, lo: float, hi: float) -> None:
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(f"{name} {value!r} is outside [{lo}, {hi}]")


@dataclass(frozen=True)
class SafeCommand:
    """What the safety layer allows the driver to command for one control period."""

    target_pose: Vec  # (7,) xyz (m) + unit xyzw quaternion, base frame
    gripper: float  # target opening, 0 closed .. 1 open
    applied: npt.NDArray[np.float32]  # (7,) normalised action this command amounts to; zeros when held
    held: bool = False  # True when the action was rejected and the previous target is kept
    clipped: bool = False  # True when a limit changed the action
    reasons: tuple[str, ...] = ()  # what was rejected or limited, for logs and the operator


def check_action(action: object, shape: tuple[int, ...], names: tuple[str, ...] = ()) -> str | None:
    """Why `action` cannot be used (not a float numpy array of `shape` with finite values), or None if it can."""
    if not isinstance(action, np.ndarray):
        return f"expected a numpy array, got {type(action).__name__}"
    if action.dtype.kind != "f":
        return f"dtype {action.dtype} is not a floating-point type"
    if action.shape != shape:
        return f"shape {action.shape} does not match the action space {shape}"
    bad = np.flatnonzero(~np.isfinite(action))
    if bad.size:
        where = ", ".join(f"{names[i] if i < len(names) else i}={action[i]}" for i in bad.tolist())
        return f"non-finite values ({where})"
    return None


def clip_unit(action: Vec, names: tuple[str, ...]) -> tuple[Vec, list[str]]:
    """`action` clipped to [-1, 1] per component, with one reason per changed component."""
    clipped = np.clip(action, -1.0, 1.0)
    reasons = [
        f"{names[i] if i < len(names) else i} {action[i]:+.4g} is outside [-1, 1], clipped"
        for i in np.flatnonzero(clipped != action).tolist()
    ]
    return clipped, reasons


class SafetyFilter:
    """Turns normalised actions into safe absolute targets; stateless apart from its config."""

    def __init__(self, config: SafetyConfig) -> None:
        self._config = config
        self._lo = np.array(config.workspace_min, dtype=np.float64)
        self._hi = np.array(config.workspace_max, dtype=np.float64)
        self._nominal = (
            rotations.normalize(config.nominal_orientation) if config.nominal_orientation is not None else None
        )

    @property
    def config(self) -> SafetyConfig:
        return self._config

    def in_workspace(self, pose: Vec) -> bool:
        """Whether the position of `pose` lies inside the workspace box."""
        return bool(np.all(pose[:3] >= self._lo) and np.all(pose[:3] <= self._hi))

    def hold(self, current_target_pose: Vec, current_gripper: float, reason: str) -> SafeCommand:
        """A command that keeps the current target and gripper."""
        pose = self._checked_pose(current_target_pose)
        return SafeCommand(pose, float(current_gripper), np.zeros(ACTION_DIM, np.float32), held=True, reasons=(reason,))

    def filter(self, current_target_pose: Vec, action: object, current_gripper: float) -> SafeCommand:
        """The safe command for `action` applied to the current target; holds on bad data."""
        pose = self._checked_pose(current_target_pose)
        problem = check_action(action, (ACTION_DIM,), ACTION_NAMES)
        if problem is not None or not isinstance(action, np.ndarray):
            return self.hold(pose, current_gripper, f"action rejected, holding: {problem}")
        unit, reasons = clip_unit(action.astype(np.float64), ACTION_NAMES)
        applied = unit.copy()
        position = self._next_position(pose[:3], unit[:3], applied, reasons)
        orientation = self._next_orientation(pose[3:], unit[3:6], applied, reasons)
        gripper = self._next_gripper(unit[6], applied, reasons)
        return SafeCommand(
            target_pose=np.concatenate([position, orientation]),
            gripper=gripper,
            applied=np.clip(applied, -1.0, 1.0).astype(np.float32),
            clipped=bool(reasons),
            reasons=tuple(reasons),
        )

    def _checked_pose(self, pose: Vec) -> Vec:
        arr = np.asarray(pose, dtype=np.float64)
        if arr.shape != (7,) or not np.all(np.isfinite(arr)):
            raise SafetyError(f"current target pose {arr.tolist()} is not 7 finite numbers (xyz + xyzw quaternion)")
        try:
            quat = rotations.normalize(arr[3:])
        except ValueError as exc:
            raise SafetyError(f"current target pose has an invalid orientation: {exc}") from None
        return np.concatenate([arr[:3], quat])

    def _next_position(self, position: Vec, unit: Vec, applied: Vec, reasons: list[str]) -> Vec:
        step = self._config.max_translation_per_step_m
        wanted = position + unit * step
        # Widen the box to include where the target already is: never push out, never pull in unasked.
        lo = np.minimum(self._lo, position)
        hi = np.maximum(self._hi, position)
        allowed = np.clip(wanted, lo, hi)
        for i in np.flatnonzero(allowed != wanted).tolist():
            reasons.append(
                f"{_AXES[i]} target {wanted[i]:.4f} m is outside the workspace "
                f"[{self._lo[i]:.4f}, {self._hi[i]:.4f}] m, clipped to {allowed[i]:.4f} m"
            )
            applied[i] = (allowed[i] - position[i]) / step
        return allowed

    def _next_orientation(self, quat: Vec, unit: Vec, applied: Vec, reasons: list[str]) -> Vec:
        step = self._config.max_rotation_per_step_rad
        wanted = rotations.apply_rotvec(quat, unit * step)
        limit = self._config.max_orientation_deviation_rad
        if self._nominal is None or limit is None:
            return wanted
        deviation = rotations.angle_between(wanted, self._nominal)
        allowed_dev = max(limit, rotations.angle_between(quat, self._nominal))
        if deviation <= allowed_dev + _ROTATION_TOLERANCE:
            return wanted
        away = rotations.to_rotvec(rotations.multiply(wanted, rotations.conjugate(self._nominal)))
        limited = rotations.apply_rotvec(self._nominal, away * (allowed_dev / deviation))
        delta = rotations.to_rotvec(rotations.multiply(limited, rotations.conjugate(quat)))
        largest = float(np.max(np.abs(delta))) / step
        if largest > 1.0:  # keep the per-step rate limit after projecting onto the allowed cone
            delta = delta / largest
            limited = rotations.apply_rotvec(quat, delta)
        applied[3:6] = delta / step
        reasons.append(
            f"orientation {deviation:.4f} rad from nominal exceeds the limit {limit:.4f} rad, "
            f"limited to {allowed_dev:.4f} rad"
        )
        return limited

    def _next_gripper(self, unit: float, applied: Vec, reasons: list[str]) -> float:
        wanted = (float(unit) + 1.0) / 2.0
        lo, hi = self._config.gripper_min, self._config.gripper_max
        allowed = min(max(wanted, lo), hi)
        if allowed != wanted:
            reasons.append(f"gripper opening {wanted:.4f} is outside [{lo:.4f}, {hi:.4f}], clipped to {allowed:.4f}")
            applied[6] = allowed * 2.0 - 1.0
        return allowed
