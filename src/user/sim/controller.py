"""Cartesian impedance control of an arm's tool site, computed at every physics step.

Per step, with J the 6 x nv site Jacobian and M the joint-space inertia (all from `mj_step1`):

    Lambda = (J M^-1 J^T)^-1                         task-space (operational-space) inertia
    F      = K e - D J qdot                          e = position error, rotation error (axis-angle)
    D_ii   = 2 zeta sqrt(K_ii / (J M^-1 J^T)_ii)     critical damping at the effective mass along each axis
    tau    = J^T F + N^T (kn (q_rest - q) - dn qdot) + qfrc_bias      N = I - Jbar J, Jbar = M^-1 J^T Lambda

K is a physical stiffness (N/m, N m/rad) as on the real Franka's impedance controller, so joint friction
is overcome by the spring rather than scaled down by the wrist's small inertia. The null-space term
pulls the redundant joint toward a rest posture without disturbing the tool (dynamically consistent
projection), and `qfrc_bias` cancels gravity and Coriolis forces. Errors are clipped so a far target
gives a bounded force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from user.config import setting


@dataclass(frozen=True)
class OscConfig:
    """Gains and limits of the operational-space controller."""

    position_stiffness: float = setting(3000.0, "translational stiffness of the tool, N/m", min=0.0)
    rotation_stiffness: float = setting(200.0, "rotational stiffness of the tool, N m/rad", min=0.0)
    damping_ratio: float = setting(1.0, "damping relative to critical (1 = critically damped)", min=0.0)
    nullspace_stiffness: float = setting(10.0, "stiffness pulling joints to the rest posture, N m/rad", min=0.0)
    max_position_error: float = setting(0.05, "position error is clipped to this length, m", min=1e-4)
    max_rotation_error: float = setting(0.5, "rotation error is clipped to this angle, rad", min=1e-4)
    singular_damping: float = setting(1e-4, "added to J M^-1 J^T before inverting (near singularities)", min=0.0)


class OperationalSpaceController:
    """Writes joint torques for one arm into `data.ctrl` so its tool site tracks a target pose."""

    def __init__(
        self,
        model: mujoco.MjModel,
        config: OscConfig,
        *,
        site_id: int,
        dof_ids: np.ndarray,
        qpos_ids: np.ndarray,
        actuator_ids: np.ndarray,
        rest_posture: np.ndarray,
    ) -> None:
        self._model = model
        self._cfg = config
        self._site = site_id
        self._dofs = _as_index(dof_ids)
        self._qpos = _as_index(qpos_ids)
        self._acts = _as_index(actuator_ids)
        self.rest_posture = rest_posture.astype(np.float64).copy()
        nv = model.nv
        self._jac = np.zeros((6, nv))
        self._minv_jt = np.zeros((6, nv))  # rows: M^-1 J^T transposed (mj_solveM works on rows)
        self._kp = np.array([config.position_stiffness] * 3 + [config.rotation_stiffness] * 3)
        self._zeta2 = 2.0 * config.damping_ratio
        self._lam_inv = np.zeros((6, 6))
        self._diag = np.diag_indices(6)
        self._task_posture = np.zeros(6)
        self._kn = config.nullspace_stiffness
        self._dn = 2.0 * config.damping_ratio * np.sqrt(config.nullspace_stiffness)
        self._target_pos = np.zeros(3)
        self._target_quat = np.array([1.0, 0.0, 0.0, 0.0])  # w, x, y, z (MuJoCo order)
        self._quat = np.zeros(4)
        self._qerr = np.zeros(4)
        self._rotvec = np.zeros(3)
        self._err = np.zeros(6)
        self._posture = np.zeros(nv)

    def set_target(self, position: np.ndarray, quat_wxyz: np.ndarray) -> None:
        """Where the tool should be (world frame); the quaternion is normalised here."""
        self._target_pos[:] = position
        norm = float(np.linalg.norm(quat_wxyz))
        self._target_quat[:] = quat_wxyz / norm if norm > 0 else (1.0, 0.0, 0.0, 0.0)

    def apply(self, data: mujoco.MjData) -> None:
        """Compute and write the torques; call between `mj_step1` and `mj_step2`."""
        model, cfg = self._model, self._cfg
        jac, minv_jt, err = self._jac, self._minv_jt, self._err
        mujoco.mj_jacSite(model, data, jac[:3], jac[3:], self._site)
        np.subtract(self._target_pos, data.site_xpos[self._site], out=err[:3])
        length = math.sqrt(float(err[:3] @ err[:3]))
        if length > cfg.max_position_error:
            err[:3] *= cfg.max_position_error / length
        err[3:] = self._rotation_error(data)
        mujoco.mj_solveM(model, data, minv_jt, jac)  # rows of J M^-1
        lam_inv = self._lam_inv
        np.matmul(jac, minv_jt.T, out=lam_inv)
        lam_inv[self._diag] += cfg.singular_damping
        # Critical damping at the effective mass along each axis, 1 / (J M^-1 J^T)_ii.
        damping = self._zeta2 * np.sqrt(self._kp / lam_inv[self._diag])
        force = self._kp * err - damping * (jac @ data.qvel)
        posture = self._posture
        posture[self._dofs] = self._kn * (self.rest_posture - data.qpos[self._qpos]) - self._dn * data.qvel[self._dofs]
        # Null-space projection N^T p = p - J^T Lambda J M^-1 p, with Lambda applied by a Cholesky solve.
        mujoco.mju_cholFactor(lam_inv, 0.0)
        mujoco.mju_cholSolve(self._task_posture, lam_inv, minv_jt @ posture)
        tau = jac.T @ (force - self._task_posture) + posture
        # The motors' ctrlrange (the joint torque limits) clamps what MuJoCo applies.
        data.ctrl[self._acts] = tau[self._dofs] + data.qfrc_bias[self._dofs]

    def _rotation_error(self, data: mujoco.MjData) -> np.ndarray:
        """Axis-angle (world frame) turning the current tool orientation into the target one."""
        mujoco.mju_mat2Quat(self._quat, data.site_xmat[self._site])
        mujoco.mju_negQuat(self._qerr, self._quat)
        mujoco.mju_mulQuat(self._qerr, self._target_quat, self._qerr)
        if self._qerr[0] < 0.0:  # the short way round
            self._qerr *= -1.0
        mujoco.mju_quat2Vel(self._rotvec, self._qerr, 1.0)
        angle = math.sqrt(float(self._rotvec @ self._rotvec))
        if angle > self._cfg.max_rotation_error:
            self._rotvec *= self._cfg.max_rotation_error / angle
        return self._rotvec


def _as_index(ids: np.ndarray) -> slice | np.ndarray:
    """A slice when `ids` are consecutive (much cheaper to index with in the per-step loop)."""
    if ids.size and np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)):
        return slice(int(ids[0]), int(ids[0]) + int(ids.size))
    return ids
