"""Inverse kinematics of an arm's tool site: one damped least-squares solver, `PriorityIk`, for both of its uses:
an episode's start pose (`solve_ik`, at reset) and each Cartesian target of a joint-position-controlled arm (the
ARX arms' `joint_control.JointPdController`).

Strict task priority: the position error is solved first, the orientation error only in the null space of the
position Jacobian, so where a 6-DoF arm cannot take the requested orientation (joint limits, the wrist's reach) it
still reaches the position and gets as close as it can in orientation, instead of trading position for orientation
as a weighted 6-D solve would. With a `posture_gain` (the start poses: a 7-DoF arm has a joint to spare) a pull
toward the seed posture comes last, in the null space of both. Joint limits: a joint at a limit that a step would
push further is frozen for that step (its Jacobian column zeroed, the step re-solved), so the other joints take
over; steps are then scaled down to `max_step` and clipped to the limits. `PriorityIk.solve` never raises: it
returns a converged iterate, else its best one (smallest position error, then orientation error), with the
residuals; `solve_ik` raises `IkError` when a start pose is not reached.

It needs only numpy and MuJoCo's Jacobians, runs on a scratch `MjData` (the simulation's state is never touched)
and takes ~1 ms per target. Why not mink (a QP-based IK on MuJoCo; not a dependency): it solves a weighted QP over
all tasks, so position and orientation trade off by weights, not strictly; joint limits as QP constraints are its
advantage, but freezing and clipping are enough for serial arms whose targets move at most 2 cm per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.errors import IkError

Vec = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


@dataclass(frozen=True)
class IkSettings:
    """How `PriorityIk` iterates (the ARX arms' values are settings of `JointControlConfig`)."""

    iterations: int  # per solve, at most (>= 1)
    damping: float  # lambda of the damped least-squares steps, m or rad
    max_step: float  # largest joint change per iteration, rad
    tolerance: float  # done when the position (m) and orientation (rad) errors are both below
    posture_gain: float = 0.0  # pull toward the seed posture per iteration, in the tasks' null space (0: none)


# Start poses: converged tightly (the episode starts exactly there), near the home posture.
START_POSE = IkSettings(iterations=300, damping=1e-2, max_step=0.2, tolerance=1e-5, posture_gain=0.05)


@dataclass(frozen=True)
class IkResult:
    """Joint positions found by `PriorityIk` and how far the tool stays from the target there."""

    q: Vec  # joint positions, same order as the IK's joints
    position_error: float  # m
    rotation_error: float  # rad

    def within(self, tolerance: float) -> bool:
        """Whether both errors are below `tolerance` (m and rad)."""
        return self.position_error < tolerance and self.rotation_error < tolerance

    def better_than(self, other: IkResult) -> bool:
        """Position first (to 0.1 mm), then orientation."""
        if abs(self.position_error - other.position_error) > 1e-4:
            return self.position_error < other.position_error
        return self.rotation_error < other.rotation_error


class PriorityIk:
    """Position-first damped least-squares IK of one site over a set of joints (see the module docstring)."""

    def __init__(
        self, model: mujoco.MjModel, settings: IkSettings, *, site_id: int, qpos_ids: Index, dof_ids: Index
    ) -> None:
        self._model = model
        self._data = mujoco.MjData(model)  # scratch: IK never touches the simulation's state
        self.settings = settings
        self._site = site_id
        self._qpos = np.asarray(qpos_ids, dtype=np.int64)
        self._dofs = np.asarray(dof_ids, dtype=np.int64)
        joints = model.dof_jntid[self._dofs]
        limited = model.jnt_limited[joints].astype(bool)
        self.low = np.where(limited, model.jnt_range[joints, 0], -np.inf)
        self.high = np.where(limited, model.jnt_range[joints, 1], np.inf)
        self._jac = np.zeros((6, model.nv))
        self._quat, self._qerr = np.zeros(4), np.zeros(4)

    def errors(self, q: Vec, position: Vec, quat_wxyz: Vec) -> tuple[Vec, Vec]:
        """Position error (m) and axis-angle orientation error (rad, world frame) of the site at `q`."""
        d = self._data
        d.qpos[self._qpos] = q
        mujoco.mj_kinematics(self._model, d)
        mujoco.mj_comPos(self._model, d)
        mujoco.mju_mat2Quat(self._quat, d.site_xmat[self._site])
        mujoco.mju_negQuat(self._qerr, self._quat)
        mujoco.mju_mulQuat(self._qerr, quat_wxyz, self._qerr)
        if self._qerr[0] < 0.0:
            self._qerr *= -1.0
        rot = np.zeros(3)
        mujoco.mju_quat2Vel(rot, self._qerr, 1.0)
        return position - d.site_xpos[self._site], rot

    def solve(self, seed: Vec, position: Vec, quat_wxyz: Vec) -> IkResult:
        """Joint positions near `seed` putting the site at the pose (position first), within the limits."""
        cfg = self.settings
        target = quat_wxyz / np.linalg.norm(quat_wxyz)
        q = np.clip(seed.astype(np.float64), self.low, self.high)
        best: IkResult | None = None
        for _ in range(cfg.iterations):
            ep, er = self.errors(q, position, target)
            result = IkResult(q.copy(), float(np.linalg.norm(ep)), float(np.linalg.norm(er)))
            if result.within(cfg.tolerance):
                return result
            if best is None or result.better_than(best):
                best = result
            mujoco.mj_jacSite(self._model, self._data, self._jac[:3], self._jac[3:], self._site)
            posture = cfg.posture_gain * (seed - q) if cfg.posture_gain > 0.0 else None
            free = np.ones(len(q), dtype=bool)
            for _ in range(len(q)):  # joints at a limit that the step pushes further are frozen, then re-solve
                dq = self._step(free, ep, er, posture)
                blocked = free & (((q <= self.low) & (dq < 0.0)) | ((q >= self.high) & (dq > 0.0)))
                if not blocked.any():
                    break
                free &= ~blocked
            largest = float(np.max(np.abs(dq)))
            if largest > cfg.max_step:
                dq *= cfg.max_step / largest
            q = np.clip(q + dq, self.low, self.high)
        ep, er = self.errors(q, position, target)
        last = IkResult(q.copy(), float(np.linalg.norm(ep)), float(np.linalg.norm(er)))
        return last if best is None or last.within(cfg.tolerance) or last.better_than(best) else best

    def _step(self, free: npt.NDArray[np.bool_], ep: Vec, er: Vec, posture: Vec | None) -> Vec:
        """Damped least-squares step over the free joints: position first, orientation in the position task's null
        space, then (with a posture) the posture in the null space of both."""
        jp = self._jac[:3, self._dofs] * free
        jr = self._jac[3:, self._dofs] * free
        lam2 = self.settings.damping**2
        eye3 = np.eye(3)
        jp_pinv = jp.T @ np.linalg.inv(jp @ jp.T + lam2 * eye3)
        dq: Vec = jp_pinv @ ep
        null = np.eye(jp.shape[1]) - jp_pinv @ jp
        jr_null = jr @ null
        dq += null @ (jr_null.T @ np.linalg.solve(jr_null @ jr_null.T + lam2 * eye3, er - jr @ dq))
        if posture is not None:
            j = np.vstack([jp, jr])
            dq += (np.eye(j.shape[1]) - np.linalg.pinv(j) @ j) @ (posture * free)
        return dq


def solve_ik(
    model: mujoco.MjModel,
    *,
    site_id: int,
    qpos_ids: Index,
    dof_ids: Index,
    seed: Vec,
    position: Vec,
    quat_wxyz: Vec,
) -> Vec:
    """Joint positions (same order as `qpos_ids`) putting the site at a start pose, from `seed` and near it.

    Raises `IkError` when the pose is not reached within `START_POSE.tolerance` (m and rad) inside the joint limits.
    """
    ik = PriorityIk(model, START_POSE, site_id=site_id, qpos_ids=qpos_ids, dof_ids=dof_ids)
    result = ik.solve(seed, position, quat_wxyz)
    if not result.within(START_POSE.tolerance):
        target = quat_wxyz / np.linalg.norm(quat_wxyz)
        raise IkError(
            f"the start pose {np.round(position, 3).tolist()} (quat wxyz {np.round(target, 3).tolist()}) is out of "
            f"reach of the arm (remaining error {result.position_error:.2e} m, {result.rotation_error:.2e} rad); "
            "move the task's start region"
        )
    return result.q
