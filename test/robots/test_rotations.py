"""Quaternion helpers: xyzw convention, base-frame rotation vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from user.robots import rotations as rot


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def as_matrix(q: np.ndarray) -> np.ndarray:
    return np.stack([rot.rotate(q, e) for e in np.eye(3)], axis=1)


def test_identity_and_xyzw_layout() -> None:
    assert rot.from_rotvec([0.0, 0.0, 0.0]).tolist() == [0.0, 0.0, 0.0, 1.0]  # no rotation: w last
    half_turn_x = rot.from_rotvec([math.pi, 0.0, 0.0])
    np.testing.assert_allclose(half_turn_x, [1.0, 0.0, 0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("v", [[0.1, -0.2, 0.3], [0.0, 0.0, 0.0], [1e-14, 0.0, 0.0], [0.0, 3.0, 0.0]])
def test_rotvec_round_trip(v: list[float]) -> None:
    np.testing.assert_allclose(rot.to_rotvec(rot.from_rotvec(v)), v, atol=1e-12)


def test_to_rotvec_is_the_shortest_rotation_for_either_sign() -> None:
    q = rot.from_rotvec([0.0, 0.0, 0.5])
    np.testing.assert_allclose(rot.to_rotvec(-q), [0.0, 0.0, 0.5], atol=1e-12)


def test_from_euler_is_fixed_axis_roll_pitch_yaw() -> None:
    q = rot.from_euler(0.3, -0.2, 1.1)
    np.testing.assert_allclose(as_matrix(q), rot_z(1.1) @ rot_y(-0.2) @ rot_x(0.3), atol=1e-12)


def test_apply_rotvec_rotates_about_base_axes() -> None:
    down = rot.from_euler(math.pi, 0.0, 0.0)  # a gripper pointing down
    turned = rot.apply_rotvec(down, [0.0, 0.0, 0.2])
    np.testing.assert_allclose(as_matrix(turned), rot_z(0.2) @ as_matrix(down), atol=1e-12)


def test_multiply_composes_right_first() -> None:
    a, b = rot.from_rotvec([0.4, 0.0, 0.0]), rot.from_rotvec([0.0, 0.7, 0.0])
    np.testing.assert_allclose(as_matrix(rot.multiply(a, b)), as_matrix(a) @ as_matrix(b), atol=1e-12)


def test_angle_between() -> None:
    a = rot.from_euler(0.1, 0.2, 0.3)
    b = rot.apply_rotvec(a, [0.0, 0.25, 0.0])
    assert rot.angle_between(a, b) == pytest.approx(0.25)
    assert rot.angle_between(b, a) == pytest.approx(0.25)
    assert rot.angle_between(a, -a) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize("q", [[0.0, 0.0, 0.0, 0.0], [float("nan"), 0.0, 0.0, 1.0]])
def test_normalize_refuses_quaternions_without_direction(q: list[float]) -> None:
    with pytest.raises(ValueError, match="no direction"):
        rot.normalize(q)
