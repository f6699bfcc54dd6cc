"""`ArxSim`: the physics-level simulated ARX L5 / X5, under joint PD position control with IK.

An `ArmSim` whose controller is `JointPdController` (IK per Cartesian target, joint PD + gravity
compensation at `JointControlConfig.rate_hz`, see `joint_control`) instead of operational-space
impedance. The PD period must be a whole number of physics steps: when the configured timestep does not
divide it (the default 2 ms does not divide 5 ms), the largest timestep below it that does is used
(2 ms -> 1.667 ms, i.e. 3 physics steps per 200 Hz PD update) and logged.
"""

from __future__ import annotations

import dataclasses
import logging
import math

import numpy as np

from user.robots.base import ArmState
from user.sim.arm_sim import ArmController, ArmSim, ArmSimConfig
from user.sim.arx_model import arx_model
from user.sim.joint_control import JointControlConfig, JointPdController
from user.tasks.base import Task

_log = logging.getLogger(__name__)
ARX_VARIANTS = {"arx_l5": "L5", "arx_x5": "X5"}  # `SimRobotConfig.arm` value -> arx5-interface model name

# Task layouts inside the ARX's tool-down reach (see `arx_model`): closer to the base, lower, shifted to -y.
# Used when a simulated ARX work cell names a task without task_params.
ARX_TASK_PARAMS: dict[str, dict[str, object]] = {
    "button_press": {
        "row_x": (0.27, 0.33),
        "row_y": (-0.1, -0.06),
        "spacing": 0.1,
        "start_region": ((0.26, 0.34), (-0.12, 0.0), (0.12, 0.14)),
    },
    "pick_place": {
        "tray_x": (0.3, 0.34),
        "tray_y": 0.1,
        "tray_inner_half": 0.075,
        "cube_offset": 0.01,
        "cube_yaw": 0.2,
        "start_region": ((0.26, 0.34), (-0.08, 0.04), (0.12, 0.14)),
    },
}


def fit_timestep(config: ArmSimConfig, pd_rate_hz: float) -> ArmSimConfig:
    """`config` with a physics timestep that divides both the PD period and the control period."""
    pd_period = 1.0 / pd_rate_hz
    steps = math.ceil(pd_period / config.scene.timestep - 1e-9)
    timestep = pd_period / steps
    if abs(timestep - config.scene.timestep) < 1e-12:
        return config
    _log.info(
        "physics timestep %.4g s -> %.4g s so the %.0f Hz joint PD loop is %d physics steps",
        config.scene.timestep,
        timestep,
        pd_rate_hz,
        steps,
    )
    return dataclasses.replace(config, scene=dataclasses.replace(config.scene, timestep=timestep))


class ArxSim(ArmSim):
    """The ARX arm + gripper under joint PD + IK control in a MuJoCo scene with an optional task."""

    def __init__(
        self,
        task: Task | None = None,
        config: ArmSimConfig | None = None,
        joint_control: JointControlConfig | None = None,
        variant: str = "L5",
    ) -> None:
        self.joint_control = joint_control or JointControlConfig()
        self._pd: JointPdController | None = None
        super().__init__(arx_model(variant), task, fit_timestep(config or ArmSimConfig(), self.joint_control.rate_hz))

    def reset(self, seed: int | None) -> ArmState:
        if self._pd is not None:
            self._pd.forget()  # the arm is about to be teleported to the episode's start
        return super().reset(seed)

    def _make_controller(self) -> ArmController:
        self._pd = JointPdController(
            self.model,
            self.joint_control,
            site_id=self._site,
            qpos_ids=self._qpos_ids,
            dof_ids=self._dof_ids,
            actuator_ids=np.asarray(self._motor_ids),
        )
        return self._pd
