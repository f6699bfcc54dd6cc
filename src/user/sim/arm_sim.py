"""`ArmSim`: one simulated arm with its task objects; the physics layer under `SimFrankaRobot`.

It owns the MuJoCo model and data and runs a torque controller at every physics step (`timestep`, 500 Hz
by default; operational-space impedance unless a subclass picks another in `_make_controller`): `command`
sets the tool target and gripper opening, `advance` runs one control period (physics steps = period /
timestep), `read_state` returns an `ArmState`. Nothing here paces to the wall clock or renders; the robot
class does that around it.

Time stamps come from the simulation clock (nanoseconds, never going backwards across resets), so a
seeded episode replays bit for bit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots.base import ArmState
from user.sim.arm_model import ArmModel
from user.sim.controller import OperationalSpaceController, OscConfig
from user.sim.errors import SimError, SimUnstableError, route_mujoco_warnings_to_logging
from user.sim.ik import solve_ik
from user.sim.scene import SceneConfig, compose_scene
from user.sim.world import World, wxyz_to_xyzw, xyzw_to_wxyz
from user.tasks.base import Task, TaskStart, TaskState

Vec = npt.NDArray[np.float64]
_log = logging.getLogger(__name__)
_DIVERGENCE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)


class ArmController(Protocol):
    """What `ArmSim` needs of a torque controller: a tool target, and torques written at every physics step."""

    def set_target(self, position: Vec, quat_wxyz: Vec) -> None: ...

    def apply(self, data: mujoco.MjData) -> None: ...


@dataclass(frozen=True)
class ArmSimConfig:
    """Physics-level settings of a simulated arm."""

    control_rate_hz: float = setting(10.0, "policy rate: `advance` runs 1/rate seconds of physics", min=0.1, max=1000.0)
    settle_s: float = setting(0.2, "physics time run at reset so grasps and objects come to rest, s", min=0.0, max=5.0)
    scene: SceneConfig = setting(SceneConfig(), "physics options and scenery")
    controller: OscConfig = setting(OscConfig(), "operational-space controller gains")


class ArmSim:
    """An arm under Cartesian impedance control in a MuJoCo scene, with an optional task."""

    def __init__(self, arm: ArmModel, task: Task | None, config: ArmSimConfig) -> None:
        route_mujoco_warnings_to_logging()
        self.arm = arm
        self.task = task
        self.config = config
        self.model = compose_scene(arm, task, config.scene)
        self.data = mujoco.MjData(self.model)
        period_steps = 1.0 / (config.control_rate_hz * self.model.opt.timestep)
        self.substeps = max(1, round(period_steps))
        if abs(period_steps - self.substeps) > 1e-6:
            _log.warning("control period is not a whole number of physics steps; using %d steps", self.substeps)
        m = self.model
        joints = [self._id(mujoco.mjtObj.mjOBJ_JOINT, j) for j in arm.joints]
        self._qpos_ids = np.array([m.jnt_qposadr[j] for j in joints])
        self._dof_ids = np.array([m.jnt_dofadr[j] for j in joints])
        fingers = [self._id(mujoco.mjtObj.mjOBJ_JOINT, j) for j in arm.gripper_joints]
        self._finger_qpos = np.array([m.jnt_qposadr[j] for j in fingers])
        self._site = self._id(mujoco.mjtObj.mjOBJ_SITE, arm.tcp_site)
        self._gripper_act = self._id(mujoco.mjtObj.mjOBJ_ACTUATOR, arm.gripper_actuator)
        self._home = np.array(arm.home, dtype=np.float64)
        self._motor_ids = np.array([self._id(mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in arm.motors])
        self.controller: ArmController = self._make_controller()
        self.world = World(m, self.data, arm.tcp_site)
        self._clock_base_ns = 0
        self._vel = np.zeros(6)
        self._quat = np.zeros(4)
        self.reset(0)

    @property
    def period_s(self) -> float:
        return float(self.substeps * self.model.opt.timestep)

    @property
    def stamp_ns(self) -> int:
        """Simulation clock, ns; keeps counting across resets."""
        return self._clock_base_ns + round(float(self.data.time) * 1e9)

    def reset(self, seed: int | None) -> ArmState:
        """Start an episode: arm at the task's (seeded, random) start, objects placed, settled."""
        self._clock_base_ns = self.stamp_ns
        m, d = self.model, self.data
        mujoco.mj_resetData(m, d)
        rng = np.random.default_rng(seed)
        start = self.task.sample_start(rng) if self.task is not None else self._home_start()
        pose = np.asarray(start.tcp_pose, dtype=np.float64)
        d.qpos[self._qpos_ids] = solve_ik(
            m,
            site_id=self._site,
            qpos_ids=self._qpos_ids,
            dof_ids=self._dof_ids,
            seed=self._home,
            position=pose[:3],
            quat_wxyz=xyzw_to_wxyz(pose[3:]),
        )
        if start.grasp_width is not None:
            finger = start.grasp_width / 2.0 - self.arm.finger_pad_offset
            gripper = 0.0
        else:
            finger = float(np.clip(start.gripper, 0.0, 1.0)) * self.arm.finger_travel
            gripper = start.gripper
        d.qpos[self._finger_qpos] = np.clip(finger, 0.0, self.arm.finger_travel)
        mujoco.mj_forward(m, d)
        if self.task is not None:
            self.task.place(self.world, start)
            mujoco.mj_forward(m, d)
        self.command(pose, gripper)
        self._run(round(self.config.settle_s / m.opt.timestep))
        return self.read_state()

    def command(self, target_pose: Vec, gripper: float) -> None:
        """Set the tool target (xyz + xyzw, base frame) and gripper opening (0 closed .. 1 open)."""
        pose = np.asarray(target_pose, dtype=np.float64)
        if pose.shape != (7,) or not np.all(np.isfinite(pose)) or not np.isfinite(gripper):
            raise SimError(f"invalid command: pose {pose.tolist()}, gripper {gripper!r}")
        self.controller.set_target(pose[:3], xyzw_to_wxyz(pose[3:]))
        self.data.ctrl[self._gripper_act] = float(np.clip(gripper, 0.0, 1.0)) * self.arm.gripper_ctrl_open

    def advance(self, periods: int = 1) -> None:
        """Run `periods` control periods of physics with the controller in the loop."""
        self._run(self.substeps * periods)

    def read_state(self) -> ArmState:
        m, d = self.model, self.data
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_SITE, self._site, self._vel, 0)
        mujoco.mju_mat2Quat(self._quat, d.site_xmat[self._site])
        fingers = d.qpos[self._finger_qpos]
        return ArmState(
            stamp_ns=self.stamp_ns,
            tcp_pose=np.concatenate([d.site_xpos[self._site], wxyz_to_xyzw(self._quat)]),
            tcp_velocity=np.concatenate([self._vel[3:], self._vel[:3]]),
            joint_positions=d.qpos[self._qpos_ids].copy(),
            joint_velocities=d.qvel[self._dof_ids].copy(),
            gripper=float(np.clip(np.mean(fingers) / self.arm.finger_travel, 0.0, 1.0)),
        )

    def task_state(self) -> TaskState:
        """The task's view of the world (empty without a task)."""
        return self.task.read(self.world) if self.task is not None else TaskState()

    def _run(self, steps: int) -> None:
        m, d, apply = self.model, self.data, self.controller.apply
        step1, step2 = mujoco.mj_step1, mujoco.mj_step2
        for _ in range(steps):
            step1(m, d)
            apply(d)
            step2(m, d)
        bad = sum(int(d.warning[w].number) for w in _DIVERGENCE_WARNINGS)
        if bad or not np.all(np.isfinite(d.qpos)):
            raise SimUnstableError(
                f"the simulation diverged at t = {d.time:.3f} s ({bad} bad position/velocity/acceleration "
                "warnings); reset the episode"
            )

    def _make_controller(self) -> ArmController:
        """The torque controller run at every physics step (operational-space impedance by default)."""
        return OperationalSpaceController(
            self.model,
            self.config.controller,
            site_id=self._site,
            dof_ids=self._dof_ids,
            qpos_ids=self._qpos_ids,
            actuator_ids=self._motor_ids,
            rest_posture=self._home,
        )

    def _home_start(self) -> TaskStart:
        scratch = mujoco.MjData(self.model)
        scratch.qpos[self._qpos_ids] = self._home
        mujoco.mj_kinematics(self.model, scratch)
        mujoco.mju_mat2Quat(self._quat, scratch.site_xmat[self._site])
        return TaskStart(np.concatenate([scratch.site_xpos[self._site], wxyz_to_xyzw(self._quat)]), gripper=1.0)

    def _id(self, kind: mujoco.mjtObj, name: str) -> int:
        idx = int(mujoco.mj_name2id(self.model, kind, name))
        if idx < 0:
            raise SimError(f"arm model {self.arm.name!r} has no {kind.name.removeprefix('mjOBJ_').lower()} {name!r}")
        return idx
