"""Helpers for scripted experts: turn "go to this tool pose with this gripper" into a normalised action."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from user.robots import rotations
from user.robots.base import ArmState
from user.tasks.base import ActionScale

Vec = npt.NDArray[np.float64]
CLOSE = -1.0  # gripper action component: closed
OPEN = 1.0  # gripper action component: fully open


def servo(
    arm: ArmState,
    position: Vec,
    quat: Vec,
    gripper: float,
    scale: ActionScale,
    *,
    gain: float = 0.6,
    max_speed: float = 1.0,
) -> npt.NDArray[np.float32]:
    """Action moving the tool a fraction `gain` of the way to the pose per step, at most `max_speed` (unit action).

    Translation keeps its direction when limited (the largest component is scaled to `max_speed`).
    """
    move = (np.asarray(position, dtype=np.float64) - arm.tcp_pose[:3]) * gain / scale.translation_m
    turn = rotations.to_rotvec(rotations.multiply(rotations.normalize(quat), rotations.conjugate(arm.tcp_pose[3:])))
    turn = turn * gain / scale.rotation_rad
    action = np.concatenate([_limit(move, max_speed), _limit(turn, 1.0), [gripper]])
    out: npt.NDArray[np.float32] = np.clip(action, -1.0, 1.0).astype(np.float32)
    return out


def yaw_about_z(angle: float, base: Vec) -> Vec:
    """Orientation `base` turned by `angle` (rad) about the base z axis."""
    return rotations.apply_rotvec(base, np.array([0.0, 0.0, angle]))


def square_yaw(quat: Vec) -> float:
    """Yaw (rad, in [-pi/4, pi/4)) of a body with 90-degree symmetry about z: angle of its x axis, modulo 90 deg."""
    x_axis = rotations.rotate(rotations.normalize(quat), np.array([1.0, 0.0, 0.0]))
    yaw = float(np.arctan2(x_axis[1], x_axis[0]))
    return (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4


def _limit(v: Vec, limit: float) -> Vec:
    largest = float(np.max(np.abs(v))) if v.size else 0.0
    return v * (limit / largest) if largest > limit else v
