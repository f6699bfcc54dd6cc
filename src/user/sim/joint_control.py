"""Joint PD position control with inverse kinematics: how the 6-DoF ARX arms follow a Cartesian target.

The real ARX controller takes joint (or end-effector) position targets and closes a joint PD loop with
gravity compensation in the motor drivers. The simulation reproduces that chain:

1. IK, once per new Cartesian target (10 Hz from `ArmRobot`): `PriorityIk` turns the tool pose into joint
   targets. It is damped least squares with a strict task priority: the position error is solved first,
   the orientation error only in the null space of the position Jacobian, so where a 6-DoF arm cannot take
   the requested orientation (joint limits, the wrist's reach) it still reaches the position and gets as
   close as it can in orientation, instead of trading position for orientation as a weighted 6-D solve
   would. Joint limits: a joint at a limit that a step would push further is frozen for that step (its
   Jacobian column zeroed, the step re-solved), so the other joints take over; steps are then clipped to
   the limits. It never raises: it returns its best iterate (smallest position error, then orientation
   error) and reports the residuals.
2. Interpolation: the joint target moves linearly from the previous one to the new one over
   `interpolation_s` (like the SDK's preview interpolation), so a 2 cm target jump is not a torque step.
3. Joint PD at `rate_hz` (200 Hz): tau = Kp (q* - q) - Kd qdot + qfrc_bias (gravity and Coriolis),
   computed every 1/rate_hz of simulation time and held (zero-order hold) in between, as a motor bus
   would; MuJoCo clamps it to the motors' torque limits.

Why not mink: mink (installed) solves a weighted QP over all tasks, so position and orientation trade off
by weights, not strictly; joint limits as QP constraints are its advantage, but box clipping is enough
for a 6-joint serial arm whose targets move at most 2 cm per step. The DLS below needs only numpy and
MuJoCo's Jacobians, runs on a scratch `MjData` and takes ~1 ms per target.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.sim.errors import SimError

Vec = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JointControlConfig:
    """Joint PD gains, the PD rate and the IK settings of a position-controlled arm."""

    rate_hz: float = setting(200.0, "joint PD loop rate, Hz (torques are held between updates)", min=10.0, max=2000.0)
    kp: tuple[float, ...] = setting(
        (200.0, 200.0, 200.0, 60.0, 40.0, 30.0), "proportional gain per joint, N m/rad (base to tip)"
    )
    kd: tuple[float, ...] = setting((6.0, 6.0, 6.0, 1.2, 0.8, 0.6), "damping gain per joint, N m s/rad (base to tip)")
    interpolation_s: float = setting(
        0.1, "time over which the joint target moves from the previous IK solution to the new one, s", min=0.0, max=1.0
    )
    ik_iterations: int = setting(40, "IK iterations per Cartesian target at most", min=1, max=1000)
    ik_damping: float = setting(1e-2, "damping of the least-squares steps (lambda, in m or rad)", min=1e-6)
    ik_max_step: float = setting(0.2, "largest joint change per IK iteration, rad", min=1e-3)
    ik_tolerance: float = setting(1e-4, "IK stops when position (m) and orientation (rad) errors are below", min=1e-9)


@dataclass(frozen=True)
class IkResult:
    """Joint positions found by `PriorityIk` and how far the tool stays from the target there."""

    q: Vec  # joint positions, same order as the IK's joints
    position_error: float  # m
    rotation_error: float  # rad


class PriorityIk:
    """Position-first damped least-squares IK of one site over a set of joints (see the module docstring)."""

    def __init__(
        self, model: mujoco.MjModel, config: JointControlConfig, *, site_id: int, qpos_ids: Index, dof_ids: Index
    ) -> None:
        self._model = model
        self._data = mujoco.MjData(model)  # scratch: IK never touches the simulation's state
        self._cfg = config
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
        cfg = self._cfg
        target = quat_wxyz / np.linalg.norm(quat_wxyz)
        q = np.clip(seed.astype(np.float64), self.low, self.high)
        best: IkResult | None = None
        lam2 = cfg.ik_damping**2
        for _ in range(cfg.ik_iterations):
            ep, er = self.errors(q, position, target)
            result = IkResult(q.copy(), float(np.linalg.norm(ep)), float(np.linalg.norm(er)))
            if best is None or _better(result, best):
                best = result
            if result.position_error < cfg.ik_tolerance and result.rotation_error < cfg.ik_tolerance:
                break
            mujoco.mj_jacSite(self._model, self._data, self._jac[:3], self._jac[3:], self._site)
            free = np.ones(len(q), dtype=bool)
            for _ in range(len(q)):  # joints at a limit that the step pushes further are frozen, then re-solve
                dq = self._step(self._jac[:3, self._dofs] * free, self._jac[3:, self._dofs] * free, ep, er, lam2)
                blocked = free & (((q <= self.low) & (dq < 0.0)) | ((q >= self.high) & (dq > 0.0)))
                if not blocked.any():
                    break
                free &= ~blocked
            largest = float(np.max(np.abs(dq)))
            if largest > cfg.ik_max_step:
                dq *= cfg.ik_max_step / largest
            q = np.clip(q + dq, self.low, self.high)
        else:
            ep, er = self.errors(q, position, target)
            last = IkResult(q.copy(), float(np.linalg.norm(ep)), float(np.linalg.norm(er)))
            best = last if best is None or _better(last, best) else best
        assert best is not None  # the loop runs at least once (ik_iterations >= 1)
        return best

    @staticmethod
    def _step(jp: Vec, jr: Vec, ep: Vec, er: Vec, lam2: float) -> Vec:
        """Damped least-squares step: position first, orientation in the position task's null space."""
        eye3 = np.eye(3)
        jp_pinv = jp.T @ np.linalg.inv(jp @ jp.T + lam2 * eye3)
        dq: Vec = jp_pinv @ ep
        null = np.eye(jp.shape[1]) - jp_pinv @ jp
        jr_null = jr @ null
        dq += null @ (jr_null.T @ np.linalg.solve(jr_null @ jr_null.T + lam2 * eye3, er - jr @ dq))
        return dq


def _better(a: IkResult, b: IkResult) -> bool:
    """Position first (to 0.1 mm), then orientation."""
    if abs(a.position_error - b.position_error) > 1e-4:
        return a.position_error < b.position_error
    return a.rotation_error < b.rotation_error


class JointPdController:
    """Turns tool targets into joint targets (IK) and tracks them with joint PD + gravity compensation.

    Same interface as the operational-space controller: `set_target` any time, `apply(data)` between
    `mj_step1` and `mj_step2` of every physics step. `forget()` drops the joint target (at a reset); the
    first update afterwards starts from the measured joint positions.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        config: JointControlConfig,
        *,
        site_id: int,
        qpos_ids: Index,
        dof_ids: Index,
        actuator_ids: Index,
    ) -> None:
        n = len(qpos_ids)
        if len(config.kp) != n or len(config.kd) != n:
            raise SimError(
                f"joint PD gains need {n} entries each (one per arm joint); got kp {config.kp} kd {config.kd}"
            )
        ticks = 1.0 / (config.rate_hz * model.opt.timestep)
        self.decimation = max(1, round(ticks))
        if abs(ticks - self.decimation) > 1e-6:
            raise SimError(
                f"the joint PD period (1/{config.rate_hz} s) is not a whole number of physics steps "
                f"({model.opt.timestep} s); pick a timestep that divides it"
            )
        self._cfg = config
        self._qpos = np.asarray(qpos_ids, dtype=np.int64)
        self._dofs = np.asarray(dof_ids, dtype=np.int64)
        self._acts = np.asarray(actuator_ids, dtype=np.int64)
        self._kp = np.array(config.kp, dtype=np.float64)
        self._kd = np.array(config.kd, dtype=np.float64)
        self.ik = PriorityIk(model, config, site_id=site_id, qpos_ids=self._qpos, dof_ids=self._dofs)
        self._ramp_ticks = max(1, math.ceil(config.interpolation_s * config.rate_hz))
        self._target_pos = np.zeros(3)
        self._target_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._pending = False
        self._refining = False  # the pending IK continues the previous solve of the same target
        self._steps = 0
        self._tick = 0
        self._start: Vec | None = None  # joint target at the start of the current ramp
        self._goal: Vec | None = None  # IK solution of the latest tool target
        self.joint_target: Vec | None = None  # joint target of the latest PD update
        self.last_ik: IkResult | None = None

    def set_target(self, position: Vec, quat_wxyz: Vec) -> None:
        """Where the tool should be (world frame); IK runs at the next PD update."""
        self._target_pos[:] = position
        norm = float(np.linalg.norm(quat_wxyz))
        self._target_quat[:] = quat_wxyz / norm if norm > 0 else (1.0, 0.0, 0.0, 0.0)
        self._pending, self._refining = True, False

    def forget(self) -> None:
        """Drop the joint targets (the arm was teleported, e.g. at reset)."""
        self._start = self._goal = self.joint_target = None
        self._steps = 0

    def apply(self, data: mujoco.MjData) -> None:
        """Update the torques every `decimation` physics steps; MuJoCo holds `ctrl` in between."""
        step = self._steps
        self._steps += 1
        if step % self.decimation:
            return
        q = data.qpos[self._qpos]
        if self.joint_target is None or self._goal is None:
            self.joint_target, self._goal = q.copy(), q.copy()
        if self._pending:
            previous = self.last_ik if self._refining else None
            self.last_ik = self.ik.solve(self._goal, self._target_pos, self._target_quat)
            # Not converged but still improving (a far target): continue from here at the next PD update.
            tol = self._cfg.ik_tolerance
            converged = self.last_ik.position_error < tol and self.last_ik.rotation_error < tol
            self._refining = self._pending = not converged and (previous is None or _better(self.last_ik, previous))
            if not self._pending and self.last_ik.position_error > 1e-3:
                _log.debug("tool target out of reach: %.1f mm from it", 1e3 * self.last_ik.position_error)
            self._start, self._goal, self._tick = self.joint_target.copy(), self.last_ik.q, 0
        if self._start is not None:
            self._tick = min(self._tick + 1, self._ramp_ticks)
            self.joint_target = self._start + (self._goal - self._start) * (self._tick / self._ramp_ticks)
        tau = self._kp * (self.joint_target - q) - self._kd * data.qvel[self._dofs] + data.qfrc_bias[self._dofs]
        data.ctrl[self._acts] = tau
