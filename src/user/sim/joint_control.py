"""Joint PD position control with inverse kinematics: how the 6-DoF ARX arms follow a Cartesian target.

The real ARX controller takes joint (or end-effector) position targets and closes a joint PD loop with
gravity compensation in the motor drivers. The simulation reproduces that chain:

1. IK, once per new Cartesian target (10 Hz from `ArmRobot`): `ik.PriorityIk` (the simulation's one IK) turns
   the tool pose into joint targets, position first and orientation as close as the arm allows, within the
   joint limits; it never raises, and reports the residuals. A far target that one solve does not reach is
   solved on at the next PD updates while that improves it.
2. Interpolation: the joint target moves linearly from the previous one to the new one over
   `interpolation_s` (like the SDK's preview interpolation), so a 2 cm target jump is not a torque step.
3. Joint PD at `rate_hz` (200 Hz): tau = Kp (q* - q) - Kd qdot + qfrc_bias (gravity and Coriolis),
   computed every 1/rate_hz of simulation time and held (zero-order hold) in between, as a motor bus
   would; MuJoCo clamps it to the motors' torque limits.
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
from user.sim.ik import IkResult, IkSettings, PriorityIk

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
        settings = IkSettings(config.ik_iterations, config.ik_damping, config.ik_max_step, config.ik_tolerance)
        self.ik = PriorityIk(model, settings, site_id=site_id, qpos_ids=self._qpos, dof_ids=self._dofs)
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
            converged = self.last_ik.within(self._cfg.ik_tolerance)
            self._refining = self._pending = not converged and (previous is None or self.last_ik.better_than(previous))
            if not self._pending and self.last_ik.position_error > 1e-3:
                _log.debug("tool target out of reach: %.1f mm from it", 1e3 * self.last_ik.position_error)
            self._start, self._goal, self._tick = self.joint_target.copy(), self.last_ik.q, 0
        if self._start is not None:
            self._tick = min(self._tick + 1, self._ramp_ticks)
            self.joint_target = self._start + (self._goal - self._start) * (self._tick / self._ramp_ticks)
        tau = self._kp * (self.joint_target - q) - self._kd * data.qvel[self._dofs] + data.qfrc_bias[self._dofs]
        data.ctrl[self._acts] = tau
