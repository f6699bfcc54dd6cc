"""Quaternion maths for Cartesian arms, xyzw convention, rotations expressed in the robot base frame.

Quaternions are float64 arrays `[x, y, z, w]`. A rotation vector (axis-angle) is `axis * angle` in
radians. `apply_rotvec(q, v)` rotates orientation `q` by `v` about the *base* axes (left multiply).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Vec = npt.NDArray[np.float64]

_SMALL_ANGLE = 1e-12


def normalize(q: npt.ArrayLike) -> Vec:
    """`q` scaled to unit length; raises ValueError for a zero or non-finite quaternion."""
    arr = np.asarray(q, dtype=np.float64).reshape(4)
    norm = float(np.linalg.norm(arr))
    if not math.isfinite(norm) or norm < 1e-9:
        raise ValueError(f"quaternion {arr.tolist()} has no direction (norm {norm})")
    return arr / norm


def conjugate(q: Vec) -> Vec:
    """The inverse rotation of unit quaternion `q`."""
    return np.array([-q[0], -q[1], -q[2], q[3]])


def multiply(a: Vec, b: Vec) -> Vec:
    """Hamilton product `a * b`: rotating by `b` first, then by `a`."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def from_rotvec(v: npt.ArrayLike) -> Vec:
    """Unit quaternion of rotation vector `v` (axis * angle, rad)."""
    vec = np.asarray(v, dtype=np.float64).reshape(3)
    angle = float(np.linalg.norm(vec))
    if angle < _SMALL_ANGLE:
        return normalize(np.array([vec[0] / 2, vec[1] / 2, vec[2] / 2, 1.0]))
    axis = vec / angle
    s = math.sin(angle / 2)
    return np.array([axis[0] * s, axis[1] * s, axis[2] * s, math.cos(angle / 2)])


def to_rotvec(q: Vec) -> Vec:
    """Rotation vector (axis * angle, angle in [0, pi]) of unit quaternion `q`; the shortest rotation."""
    unit = normalize(q)
    if unit[3] < 0:
        unit = -unit
    xyz = unit[:3]
    s = float(np.linalg.norm(xyz))
    if s < _SMALL_ANGLE:
        return 2.0 * xyz
    angle = 2.0 * math.atan2(s, float(unit[3]))
    return np.asarray(xyz * (angle / s), dtype=np.float64)


def angle_between(a: Vec, b: Vec) -> float:
    """Angle (rad, in [0, pi]) of the rotation taking orientation `b` to orientation `a`."""
    rel = multiply(normalize(a), conjugate(normalize(b)))
    return 2.0 * math.atan2(float(np.linalg.norm(rel[:3])), abs(float(rel[3])))


def apply_rotvec(q: Vec, v: npt.ArrayLike) -> Vec:
    """Orientation `q` rotated by rotation vector `v` about the base-frame axes."""
    return normalize(multiply(from_rotvec(v), q))


def from_euler(roll: float, pitch: float, yaw: float) -> Vec:
    """Quaternion of fixed-axis (extrinsic) rotations: roll about x, then pitch about y, then yaw about z."""
    qx = from_rotvec([roll, 0.0, 0.0])
    qy = from_rotvec([0.0, pitch, 0.0])
    qz = from_rotvec([0.0, 0.0, yaw])
    return normalize(multiply(qz, multiply(qy, qx)))


def rotate(q: Vec, v: npt.ArrayLike) -> Vec:
    """Vector `v` rotated by unit quaternion `q`."""
    vec = np.asarray(v, dtype=np.float64).reshape(3)
    p = np.array([vec[0], vec[1], vec[2], 0.0])
    return multiply(multiply(q, p), conjugate(q))[:3]
