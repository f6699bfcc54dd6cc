"""`ArmKinematics`: the TF tree of an arm from its joint positions, computed on the arm's MuJoCo model alone
(forward kinematics, no physics), so a simulated and a real arm of one type publish the same frames as the URDF
of `user.sim.urdf` names them: every link relative to its parent, then `tcp` and `wrist_camera_optical`.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.arm_model import ArmModel
from user.sim.urdf import OPTICAL_FROM_MUJOCO_CAMERA, TCP_LINK, WRIST_OPTICAL_LINK

Vec = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LinkTransform:
    parent: str  # link the transform is expressed in
    child: str  # link it places
    translation: Vec  # child origin in the parent frame, m
    rotation: Vec  # child orientation in the parent frame, quaternion (x, y, z, w) as geometry_msgs has it


class ArmKinematics:
    """Forward kinematics of one arm type; `transforms(q, gripper)` for each state."""

    def __init__(self, arm: ArmModel) -> None:
        self.arm = arm
        self.model = arm.build().compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.root = str(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, 1))
        self._names = [str(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)) for b in range(m.nbody)]
        self._arm_qpos = [int(m.jnt_qposadr[m.joint(name).id]) for name in arm.joints]
        self._finger_qpos = [int(m.jnt_qposadr[m.joint(name).id]) for name in arm.gripper_joints]
        site = m.site(arm.tcp_site)
        self._tcp_body, self._tcp_pos, self._tcp_quat = int(site.bodyid[0]), site.pos.copy(), site.quat.copy()
        self._wrist_body = int(m.body(arm.wrist_camera_body).id)
        self._optical_quat = np.zeros(4)
        mujoco.mju_mulQuat(
            self._optical_quat, np.asarray(arm.wrist_camera_quat, np.float64), OPTICAL_FROM_MUJOCO_CAMERA
        )

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The names `joint_states` carries, in its order: the arm's joints, then the fingers'."""
        return self.arm.joints + self.arm.gripper_joints

    def finger_positions(self, gripper: float) -> Vec:
        """Each finger joint's position for a gripper opening (0 closed .. 1 open)."""
        return np.full(len(self._finger_qpos), float(np.clip(gripper, 0.0, 1.0)) * self.arm.finger_travel)

    def transforms(self, joint_positions: npt.ArrayLike, gripper: float) -> list[LinkTransform]:
        """Every link relative to its parent, for these arm joint positions (rad) and gripper opening."""
        q = np.asarray(joint_positions, dtype=np.float64)
        if q.shape != (len(self._arm_qpos),) or not np.all(np.isfinite(q)):
            raise ValueError(
                f"{self.arm.name}: expected {len(self._arm_qpos)} finite joint positions, got {q.tolist()}"
            )
        d = self.data
        d.qpos[self._arm_qpos] = q
        d.qpos[self._finger_qpos] = self.finger_positions(gripper)
        mujoco.mj_kinematics(self.model, d)
        out = [
            self._relative(int(self.model.body_parentid[b]), b)
            for b in range(2, self.model.nbody)  # body 1 is the root: world -> root is the robot's placement
        ]
        out.append(_transform(self._names[self._tcp_body], TCP_LINK, self._tcp_pos, self._tcp_quat))
        out.append(
            _transform(self._names[self._wrist_body], WRIST_OPTICAL_LINK, self.arm.wrist_camera_pos, self._optical_quat)
        )
        return out

    def _relative(self, parent: int, child: int) -> LinkTransform:
        d = self.data
        inverse = np.zeros(4)
        mujoco.mju_negQuat(inverse, d.xquat[parent])
        pos, quat = np.zeros(3), np.zeros(4)
        mujoco.mju_rotVecQuat(pos, d.xpos[child] - d.xpos[parent], inverse)
        mujoco.mju_mulQuat(quat, inverse, d.xquat[child])
        return _transform(self._names[parent], self._names[child], pos, quat)


def _transform(parent: str, child: str, pos: npt.ArrayLike, quat_wxyz: npt.ArrayLike) -> LinkTransform:
    w, x, y, z = (float(v) for v in np.asarray(quat_wxyz, dtype=np.float64))
    return LinkTransform(parent, child, np.asarray(pos, dtype=np.float64).copy(), np.array([x, y, z, w]))
