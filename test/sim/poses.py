"""Forward kinematics of a compiled MuJoCo model, for tests that check where a joint posture puts a site."""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt

Vec = npt.NDArray[np.float64]


def pose_at(model: mujoco.MjModel, qpos: Vec, site: str = "tcp") -> tuple[Vec, Vec]:
    """Position and (w, x, y, z) orientation of `site` at joint positions `qpos`."""
    data = mujoco.MjData(model)
    data.qpos[: len(qpos)] = qpos
    mujoco.mj_kinematics(model, data)
    site_id = int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site))
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, data.site_xmat[site_id])
    return data.site_xpos[site_id].copy(), quat
