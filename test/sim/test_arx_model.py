"""The simulated ARX L5 / X5: built from arx5-interface's URDF, 6 DoF, the `ArmModel` contract."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from test.sim.poses import pose_at
from user.sim.arx_model import HOME, JOINT_MAX, JOINT_MIN, TORQUE_LIMITS, arx_model, arx_urdf, parse_urdf


@pytest.mark.parametrize("variant", ["L5", "X5"])
def test_model_has_six_torque_motors_a_gripper_servo_and_the_tcp_site(variant: str) -> None:
    arm = arx_model(variant)
    model = arm.build().compile()
    assert arm.dof == 6
    for joint, motor, limit in zip(arm.joints, arm.motors, arm.torque_limits, strict=True):
        act = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, motor))
        assert act >= 0 and model.actuator_trnid[act, 0] == mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        assert model.actuator_gainprm[act, 0] == 1.0 and model.actuator_biastype[act] == 0  # plain motor, gear 1
        assert model.actuator_ctrlrange[act].tolist() == [-limit, limit]
    grip = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, arm.gripper_actuator))
    assert model.actuator_ctrlrange[grip].tolist() == [0.0, arm.gripper_ctrl_open]
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, arm.tcp_site) >= 0
    for finger in arm.gripper_joints:
        j = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, finger))
        assert model.jnt_range[j].tolist() == pytest.approx([0.0, arm.finger_travel])


def test_kinematics_and_inertias_come_from_the_urdf() -> None:
    joints, inertials = parse_urdf(arx_urdf("L5"))
    model = arx_model("L5").build().compile()
    link2 = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "link2"))
    assert model.body_mass[link2] == pytest.approx(inertials["link2"].mass)
    by_name = {j.name: j for j in joints}
    assert model.body_pos[link2] == pytest.approx(by_name["joint2"].xyz)
    ranges = model.jnt_range[[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"joint{i}") for i in range(1, 7)]]
    assert ranges[:, 0] == pytest.approx(JOINT_MIN) and ranges[:, 1] == pytest.approx(JOINT_MAX)


def test_limits_match_the_sdk_robot_config() -> None:
    sdk = pytest.importorskip("arx5_interface")
    config = sdk.RobotConfigFactory.get_instance().get_config("L5")
    assert np.asarray(config.joint_pos_min) == pytest.approx(JOINT_MIN)
    assert np.asarray(config.joint_pos_max) == pytest.approx(JOINT_MAX)
    assert np.asarray(config.joint_torque_max) == pytest.approx(TORQUE_LIMITS)
    assert arx_model("L5").finger_travel * 2 == pytest.approx(config.gripper_width)


def test_home_points_the_tool_down_with_the_fingers_closing_along_x() -> None:
    model = arx_model("L5").build().compile()
    position, quat_wxyz = pose_at(model, np.array(HOME))
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, quat_wxyz)
    rot = mat.reshape(3, 3)
    assert rot[:, 2] == pytest.approx([0.0, 0.0, -1.0], abs=1e-3)  # approach (tool z) down
    assert rot[:, 0] == pytest.approx([1.0, 0.0, 0.0], abs=1e-3)  # closing direction (tool x) along x
    assert position == pytest.approx([0.3, 0.0, 0.12], abs=1e-3)
