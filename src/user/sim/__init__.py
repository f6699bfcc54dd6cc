"""MuJoCo simulation of arms with tasks and cameras: a Franka FR3 + hand under Cartesian impedance control, and
an ARX L5/X5 under IK + joint PD control (`arx_model`, `ik`, `joint_control`, `arx_sim`).

Layers, bottom up: `franka_model` (franky-sim's FR3 MJCF prepared as an `ArmModel`), `scene` (work cell
composed with MjSpec), `controller` (operational-space impedance control at every 2 ms physics step),
`arm_sim.ArmSim` / `franka_sim.FrankaSim` (physics: command, advance one control period, read state),
`cameras` (latest-frame rendering off the control loop), `user.robots.pacing` (real-time deadlines) and
`robot.SimFrankaRobot` / `robot.SimArxRobot` (the `ArmRobot` driver: safety filter, hold and e-stop come from there).

Rendering is headless: MUJOCO_GL defaults to "egl" here when unset. It only takes effect if this package
is imported before anything else imports mujoco; otherwise set MUJOCO_GL=egl (or osmesa) in the environment.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from user.robots.pacing import DeadlinePacer, PacingStats
from user.sim.arm_model import ArmModel
from user.sim.arm_sim import ArmSim, ArmSimConfig
from user.sim.arx_sim import ArxSim
from user.sim.cameras import Frame, SimCameraConfig, SimCameras, SimFrameSource
from user.sim.controller import OperationalSpaceController, OscConfig
from user.sim.errors import IkError, RenderError, SimAssetError, SimError, SimUnstableError
from user.sim.franka_model import fr3_model
from user.sim.franka_sim import FrankaSim
from user.sim.joint_control import JointControlConfig
from user.sim.robot import SimArxRobot, SimFrankaRobot, SimRobotConfig
from user.sim.scene import SceneConfig

__all__ = [
    "ArmModel",
    "ArmSim",
    "ArmSimConfig",
    "ArxSim",
    "DeadlinePacer",
    "Frame",
    "FrankaSim",
    "IkError",
    "JointControlConfig",
    "OperationalSpaceController",
    "OscConfig",
    "PacingStats",
    "RenderError",
    "SceneConfig",
    "SimArxRobot",
    "SimAssetError",
    "SimCameraConfig",
    "SimCameras",
    "SimError",
    "SimFrameSource",
    "SimFrankaRobot",
    "SimRobotConfig",
    "SimUnstableError",
    "fr3_model",
]
