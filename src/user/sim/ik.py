"""Inverse kinematics for start poses: damped least squares on the site Jacobian, posture in the null space.

Used only at reset (to put the arm where a task wants it to start), on a scratch `MjData`, so the
physics state is never touched by it.
"""

from __future__ import annotations

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.errors import IkError

MAX_ITERATIONS = 300
DAMPING = 1e-4  # lambda^2 of the damped least squares step
POSTURE_GAIN = 0.05  # null-space pull toward the seed posture per iteration
MAX_STEP = 0.2  # rad, per joint and iteration


def solve_ik(
    model: mujoco.MjModel,
    *,
    site_id: int,
    qpos_ids: np.ndarray,
    dof_ids: np.ndarray,
    seed: np.ndarray,
    position: np.ndarray,
    quat_wxyz: np.ndarray,
    tolerance: float = 1e-5,
) -> npt.NDArray[np.float64]:
    """Joint positions (same order as `qpos_ids`) putting the site at the pose, starting from `seed`.

    Raises `IkError` when the pose is not reached within `tolerance` (m and rad) inside the joint limits.
    """
    data = mujoco.MjData(model)
    q: npt.NDArray[np.float64] = seed.astype(np.float64).copy()
    low, high = _limits(model, qpos_ids, dof_ids)
    jac = np.zeros((6, model.nv))
    err = np.zeros(6)
    quat, qerr = np.zeros(4), np.zeros(4)
    target = quat_wxyz / np.linalg.norm(quat_wxyz)
    for _ in range(MAX_ITERATIONS):
        data.qpos[qpos_ids] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        err[:3] = position - data.site_xpos[site_id]
        mujoco.mju_mat2Quat(quat, data.site_xmat[site_id])
        mujoco.mju_negQuat(qerr, quat)
        mujoco.mju_mulQuat(qerr, target, qerr)
        if qerr[0] < 0:
            qerr *= -1.0
        mujoco.mju_quat2Vel(err[3:], qerr, 1.0)
        if float(np.max(np.abs(err))) < tolerance:
            return q
        mujoco.mj_jacSite(model, data, jac[:3], jac[3:], site_id)
        j = jac[:, dof_ids]
        jjt = j @ j.T + DAMPING * np.eye(6)
        step = j.T @ np.linalg.solve(jjt, err)
        null = np.eye(len(dof_ids)) - np.linalg.pinv(j) @ j
        step += null @ (POSTURE_GAIN * (seed - q))
        q = np.clip(q + np.clip(step, -MAX_STEP, MAX_STEP), low, high)
    raise IkError(
        f"the start pose {np.round(position, 3).tolist()} (quat wxyz {np.round(target, 3).tolist()}) is out of reach "
        f"of the arm (remaining error {float(np.max(np.abs(err))):.2e}); move the task's start region"
    )


def _limits(model: mujoco.MjModel, qpos_ids: np.ndarray, dof_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    joint_ids = model.dof_jntid[dof_ids]
    limited = model.jnt_limited[joint_ids].astype(bool)
    low = np.where(limited, model.jnt_range[joint_ids, 0], -np.inf)
    high = np.where(limited, model.jnt_range[joint_ids, 1], np.inf)
    return low, high
