"""The FR3 model from franky-sim: found, prepared (motors, gripper servo, canonical TCP), low-poly visuals."""

from __future__ import annotations

import importlib.util

import mujoco
import numpy as np
import pytest

from user.sim import franka_model
from user.sim.errors import SimAssetError
from user.sim.franka_model import fr3_model, load_fr3_spec
from user.tasks.base import TOOL_DOWN


def test_missing_franky_sim_is_a_typed_error_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SimAssetError, match="pip install franky-sim"):
        franka_model.franky_assets_dir()


def test_actuators_are_torque_motors_with_the_joint_limits_and_a_gripper_servo() -> None:
    model = load_fr3_spec().compile()
    arm = fr3_model()
    for motor, limit in zip(arm.motors, arm.torque_limits, strict=True):
        act = model.actuator(motor)
        assert act.biastype[0] == mujoco.mjtBias.mjBIAS_NONE  # pure torque, no servo
        np.testing.assert_allclose(act.ctrlrange, [-limit, limit])
    assert model.nu == len(arm.motors) + 1
    assert model.actuator(arm.gripper_actuator).biastype[0] == mujoco.mjtBias.mjBIAS_AFFINE


def test_home_posture_points_the_tool_down_in_the_canonical_frame() -> None:
    model = load_fr3_spec().compile()
    data = mujoco.MjData(model)
    data.qpos[:7] = fr3_model().home
    mujoco.mj_kinematics(model, data)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, data.site("tcp").xmat)
    xyzw = np.array([quat[1], quat[2], quat[3], quat[0]])
    assert min(np.linalg.norm(xyzw - TOOL_DOWN), np.linalg.norm(xyzw + TOOL_DOWN)) < 1e-3


def test_lowpoly_visuals_are_far_smaller_than_the_full_meshes() -> None:
    low = load_fr3_spec("lowpoly").compile()
    full = load_fr3_spec("full").compile()
    assert int(low.mesh_facenum.sum()) * 20 < int(full.mesh_facenum.sum())
    assert low.nbody == full.nbody and low.nv == full.nv  # same dynamics


def test_unknown_visual_level_is_refused() -> None:
    with pytest.raises(ValueError, match="lowpoly"):
        load_fr3_spec("pretty")
