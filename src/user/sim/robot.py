"""`SimFrankaRobot`: a simulated arm behind the shared `ArmRobot` (safety filter, hold, e-stop).

The arm is the FR3 (Cartesian impedance control) unless `SimRobotConfig.arm` names an ARX L5 / X5 (joint
PD + IK, `arx_sim`); `SimArxRobot` is the same class with an ARX work cell as its default config.

Each `step` commands the filtered target, runs one control period of physics (controller at every
physics step), hands the new state to the cameras, and in real-time mode sleeps to the period's
deadline. In fast mode it runs as fast as the CPU allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from user.config import KindSection, resolve_sections, setting
from user.robots.arm import ArmRobot
from user.robots.base import ArmState, NotConnectedError, RobotDescriptor
from user.robots.embodiments import embodiment_of
from user.robots.pacing import DeadlinePacer, PacingStats
from user.robots.safety import SafetyConfig
from user.sim.arm_sim import ArmSim, ArmSimConfig
from user.sim.arx_model import arx_model
from user.sim.arx_sim import ARX_TASK_PARAMS, ARX_VARIANTS, ArxSim
from user.sim.cameras import Frame, SimCameraConfig, SimCameras
from user.sim.franka_model import fr3_model
from user.sim.franka_sim import FrankaSim
from user.sim.joint_control import JointControlConfig
from user.tasks.base import ActionScale, Task, TaskState
from user.tasks.registry import TASKS, make_task


@dataclass(frozen=True)
class SimRobotConfig:
    """A simulated arm work cell (Franka FR3 by default)."""

    robot_id: str = setting("franka_sim", "unique robot name in the deployment")
    site: str = setting("local", "where the robot is (hardware registry)")
    arm: str = setting("franka", "simulated arm: franka (FR3), arx_l5, arx_x5", choices=("franka", "arx_l5", "arx_x5"))
    task: str = setting("peg_insertion", "task in the scene: peg_insertion, pick_place, button_press; '' = none")
    task_params: object | None = setting(
        None,
        "settings of the task's config (the class `task` selects); none: the task's defaults, on an ARX arm the ARX "
        "layout (arx_sim.ARX_TASK_PARAMS)",
        section=KindSection(TASKS, optional=True),
    )
    realtime: bool = setting(False, "pace every step to the wall clock (true) or run as fast as possible (false)")
    visual: str = setting("lowpoly", "arm meshes to render: lowpoly (fast) or full", choices=("lowpoly", "full"))
    cameras: SimCameraConfig = setting(SimCameraConfig(), "simulated cameras")
    sim: ArmSimConfig = setting(ArmSimConfig(), "physics, control rate and controller gains")
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")
    joint_control: JointControlConfig = setting(
        JointControlConfig(), "joint PD + IK settings of the ARX arms (unused for the franka)"
    )

    def __post_init__(self) -> None:
        resolve_sections(self)


def arx_config(task: str = "button_press", variant: str = "arx_l5", **overrides: Any) -> SimRobotConfig:
    """A simulated ARX work cell config: `variant` arm_l5 / arx_x5, robot_id "<variant>_sim", ARX task layout."""
    params: dict[str, Any] = {"robot_id": f"{variant}_sim", "arm": variant, "task": task}
    params.update(overrides)
    return SimRobotConfig(**params)


class SimFrankaRobot(ArmRobot):
    """A MuJoCo FR3 + hand with a task, cameras, and real-time or fast stepping."""

    def __init__(self, config: SimRobotConfig | None = None, task: Task | None = None) -> None:
        cfg = config or self.default_config()
        model = fr3_model(cfg.visual) if cfg.arm == "franka" else arx_model(ARX_VARIANTS[cfg.arm])  # fail early
        descriptor = RobotDescriptor(
            robot_id=cfg.robot_id,
            model=model.name,
            dof=model.dof,
            control_rate_hz=cfg.sim.control_rate_hz,
            embodiment_id=embodiment_of(cfg.arm),
            cameras=cfg.cameras.names,
            site=cfg.site,
        )
        super().__init__(descriptor, cfg.safety)
        self.config = cfg
        task_params = cfg.task_params
        if cfg.arm != "franka" and task_params is None:
            task_params = ARX_TASK_PARAMS.get(cfg.task)
        scale = ActionScale.of(cfg.safety)
        self.task = task if task is not None else (make_task(cfg.task, task_params, scale) if cfg.task else None)
        self._sim: ArmSim | None = None
        self._cameras: SimCameras | None = None
        self._pacer = DeadlinePacer(1.0 / cfg.sim.control_rate_hz)

    @staticmethod
    def default_config() -> SimRobotConfig:
        return SimRobotConfig()

    @property
    def sim(self) -> ArmSim:
        """The physics layer (for tests and tools)."""
        if self._sim is None:
            raise NotConnectedError(f"robot {self.descriptor.robot_id!r} is not connected; call connect() first")
        return self._sim

    @property
    def cameras(self) -> SimCameras | None:
        return self._cameras

    def frames(self) -> dict[str, Frame]:
        """The latest frame of every camera (possibly from an earlier step; check `stamp_ns`)."""
        return self._cameras.frames() if self._cameras is not None else {}

    def task_state(self) -> TaskState:
        return self.sim.task_state()

    def pacing_stats(self) -> PacingStats:
        """Lateness of the real-time deadlines since connect or `clear_pacing_stats` (empty in fast mode)."""
        return self._pacer.stats()

    def clear_pacing_stats(self) -> None:
        self._pacer.clear_stats()

    def observation_extras(self) -> dict[str, npt.NDArray[np.float32]]:
        return self.task.observation_extras(self.task_state()) if self.task is not None else {}

    # ---- driver hooks -------------------------------------------------------------------------------

    def _connect(self) -> None:
        cfg = self.config
        sim: ArmSim
        if cfg.arm == "franka":
            sim = FrankaSim(self.task, cfg.sim, cfg.visual)
        else:
            sim = ArxSim(self.task, cfg.sim, cfg.joint_control, ARX_VARIANTS[cfg.arm])
        cameras = SimCameras(sim.model, self.config.cameras)
        cameras.start()
        self._sim, self._cameras = sim, cameras
        self._pacer.clear_stats()

    def _close(self) -> None:
        if self._cameras is not None:
            self._cameras.close()
        self._sim, self._cameras = None, None

    def _reset(self, seed: int | None) -> ArmState:
        sim = self.sim
        state = sim.reset(seed)
        self._pacer.restart()
        if self._cameras is not None:
            self._cameras.submit(sim.data, state.stamp_ns)
        return state

    def _read_state(self) -> ArmState:
        return self.sim.read_state()

    def _command(self, target_pose: npt.NDArray[np.float64], gripper: float) -> None:
        self.sim.command(target_pose, gripper)

    def _wait_period(self) -> None:
        sim = self.sim
        sim.advance()
        if self._cameras is not None:
            self._cameras.submit(sim.data, sim.stamp_ns)
        if self.config.realtime:
            self._pacer.wait()


class SimArxRobot(SimFrankaRobot):
    """A simulated ARX L5 (or X5) work cell: `SimFrankaRobot` whose default config is `arx_config()`."""

    @staticmethod
    def default_config() -> SimRobotConfig:
        return arx_config()
