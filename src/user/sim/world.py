"""`World`: the task-facing view of a MuJoCo model and data (implements `user.tasks.base.TaskWorld`).

Converts MuJoCo's (w, x, y, z) quaternions to the project's (x, y, z, w) at this boundary, and turns
unknown names into `SimError`s that say which names exist.
"""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.errors import SimError

Vec = npt.NDArray[np.float64]


def wxyz_to_xyzw(q: npt.ArrayLike) -> Vec:
    a = np.asarray(q, dtype=np.float64)
    return np.array([a[1], a[2], a[3], a[0]])


def xyzw_to_wxyz(q: npt.ArrayLike) -> Vec:
    a = np.asarray(q, dtype=np.float64)
    return np.array([a[3], a[0], a[1], a[2]])


class World:
    """Named access to bodies and joints of one simulation, for tasks."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, tcp_site: str) -> None:
        self.model = model
        self.data = data
        self._tcp = self._id(mujoco.mjtObj.mjOBJ_SITE, tcp_site)
        self._vel = np.zeros(6)

    def object_pose(self, name: str) -> Vec:
        adr = self._free_qpos(name)
        q = self.data.qpos[adr : adr + 7]
        return np.concatenate([q[:3], wxyz_to_xyzw(q[3:])])

    def object_velocity(self, name: str) -> Vec:
        body = self._id(mujoco.mjtObj.mjOBJ_BODY, name)
        mujoco.mj_objectVelocity(self.model, self.data, mujoco.mjtObj.mjOBJ_BODY, body, self._vel, 0)
        return np.concatenate([self._vel[3:], self._vel[:3]])  # MuJoCo gives (angular, linear)

    def set_object_pose(self, name: str, pose: Vec) -> None:
        adr = self._free_qpos(name)
        p = np.asarray(pose, dtype=np.float64)
        self.data.qpos[adr : adr + 3] = p[:3]
        self.data.qpos[adr + 3 : adr + 7] = xyzw_to_wxyz(p[3:]) / np.linalg.norm(p[3:])
        dof = self.model.jnt_dofadr[self._free_joint(name)]
        self.data.qvel[dof : dof + 6] = 0.0

    def joint_position(self, name: str) -> float:
        joint = self._id(mujoco.mjtObj.mjOBJ_JOINT, name)
        return float(self.data.qpos[self.model.jnt_qposadr[joint]])

    def body_position(self, name: str) -> Vec:
        return np.array(self.data.xpos[self._id(mujoco.mjtObj.mjOBJ_BODY, name)])

    def set_body_position(self, name: str, position: Vec) -> None:
        body = self._id(mujoco.mjtObj.mjOBJ_BODY, name)
        mocap = int(self.model.body_mocapid[body])
        if mocap < 0:
            raise SimError(f"body {name!r} is not a mocap body; only mocap bodies can be moved")
        self.data.mocap_pos[mocap] = position

    def tcp_pose(self) -> Vec:
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, self.data.site_xmat[self._tcp])
        return np.concatenate([self.data.site_xpos[self._tcp], wxyz_to_xyzw(quat)])

    def _id(self, kind: mujoco.mjtObj, name: str) -> int:
        idx = int(mujoco.mj_name2id(self.model, kind, name))
        if idx < 0:
            raise SimError(f"the scene has no {kind.name.removeprefix('mjOBJ_').lower()} named {name!r}")
        return idx

    def _free_joint(self, body_name: str) -> int:
        body = self._id(mujoco.mjtObj.mjOBJ_BODY, body_name)
        joint = int(self.model.body_jntadr[body])
        if joint < 0 or self.model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_FREE:
            raise SimError(f"body {body_name!r} is not a free object (it has no free joint)")
        return joint

    def _free_qpos(self, body_name: str) -> int:
        return int(self.model.jnt_qposadr[self._free_joint(body_name)])
