"""`ArmKinematics`: the TF chain from the arm's root to `tcp`, composed from the parent-relative transforms,
lands where the simulator's tool site is for the same joint positions."""

from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np
import pytest

from user.sim.arm_model import ArmModel
from user.sim.arx_model import arx_model
from user.sim.franka_model import fr3_model
from user.sim.kinematics import ArmKinematics, LinkTransform
from user.sim.urdf import TCP_LINK, WRIST_OPTICAL_LINK


def compose(transforms: list[LinkTransform], root: str, child: str) -> tuple[np.ndarray, np.ndarray]:
    """(position, quaternion wxyz) of `child` in `root` by walking the parents."""
    by_child = {t.child: t for t in transforms}
    pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    chain = []
    while child != root:
        link = by_child[child]
        chain.append(link)
        child = link.parent
    for link in reversed(chain):
        x, y, z, w = link.rotation
        step, moved, q = np.array([w, x, y, z]), np.zeros(3), np.zeros(4)
        mujoco.mju_rotVecQuat(moved, link.translation, quat)
        mujoco.mju_mulQuat(q, quat, step)
        pos, quat = pos + moved, q
    return pos, quat


@pytest.mark.parametrize("make", [fr3_model, arx_model], ids=["fr3", "arx_l5"])
def test_tcp_from_the_chain_matches_the_simulated_site(make: Callable[[], ArmModel]) -> None:
    arm = make()
    kin = ArmKinematics(arm)
    model = arm.build().compile()
    data = mujoco.MjData(model)
    site = model.site(arm.tcp_site).id
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = np.asarray(arm.home) + rng.uniform(-0.4, 0.4, size=arm.dof)
        for name, value in zip(arm.joints, q, strict=True):
            data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
        mujoco.mj_kinematics(model, data)
        root = model.body(kin.root).id
        expected_quat, inverse, rel = np.zeros(4), np.zeros(4), np.zeros(3)
        mujoco.mju_mat2Quat(expected_quat, data.site_xmat[site])
        mujoco.mju_negQuat(inverse, data.xquat[root])
        mujoco.mju_rotVecQuat(rel, data.site_xpos[site] - data.xpos[root], inverse)
        rel_quat = np.zeros(4)
        mujoco.mju_mulQuat(rel_quat, inverse, expected_quat)
        pos, quat = compose(kin.transforms(q, 0.5), kin.root, TCP_LINK)
        np.testing.assert_allclose(pos, rel, atol=1e-9)
        assert abs(float(np.dot(quat, rel_quat))) == pytest.approx(1.0, abs=1e-9)


def test_bad_joint_positions_are_refused() -> None:
    kin = ArmKinematics(fr3_model())
    with pytest.raises(ValueError, match="7 finite joint positions"):
        kin.transforms(np.zeros(6), 0.5)
    with pytest.raises(ValueError, match="finite"):
        kin.transforms(np.array([np.nan] * 7), 0.5)


def test_fingers_root_and_the_wrist_camera_frame() -> None:
    arm = fr3_model()
    kin = ArmKinematics(arm)
    assert kin.root == "base" and ArmKinematics(arx_model()).root == "base_link"
    for opening, expected in ((0.5, 0.5), (-1.0, 0.0), (2.0, 1.0)):
        np.testing.assert_allclose(kin.finger_positions(opening), [expected * arm.finger_travel] * 2)
    closed = {t.child: t for t in kin.transforms(np.asarray(arm.home), 0.0)}
    opened = {t.child: t for t in kin.transforms(np.asarray(arm.home), 1.0)}
    moved = np.linalg.norm(opened["left_finger"].translation - closed["left_finger"].translation)
    assert moved == pytest.approx(arm.finger_travel, abs=1e-9)
    assert "base" not in closed and all(t.parent != "world" for t in closed.values())
    assert len(closed) == kin.model.nbody - 2 + 2  # every body but world and the root, then tcp and the camera
    wrist = closed[WRIST_OPTICAL_LINK]
    assert wrist.parent == arm.wrist_camera_body
    np.testing.assert_allclose(wrist.translation, arm.wrist_camera_pos)
    assert all(t.translation.dtype == np.float64 and t.rotation.dtype == np.float64 for t in closed.values())
