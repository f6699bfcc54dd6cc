"""Robot drivers by name, with what the control loop needs from each: scorer and observation sources.

`sim_franka` / `sim_arx`: the MuJoCo work cells (task reward, extras, optional privileged state and
camera frames). `gym`: any gymnasium env id (the env's own reward and termination). Real drivers (Franka,
ARX) are added here later; they need only a `Scorer` (a task's rule-based reward or a reward model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from user.robot_loop.observe import ExtrasFn, FramesFn, TaskStateFn
from user.robot_loop.scoring import GymScorer, Scorer, TaskScorer
from user.robots.base import Robot
from user.robots.gym_robot import GymRobot
from user.robots.sim import CameraConfig, SimArxRobot, SimFrankaRobot, SimRobotConfig
from user.robots.sim.robot import arx_config

DRIVERS = ("sim_franka", "sim_arx", "gym")
GYM_MAX_STEPS = 200  # episode limit of gym envs when none is given (the env may truncate earlier)


class DriverError(ValueError):
    """The robot driver settings do not describe a robot that can be built."""


@dataclass(frozen=True)
class DriverSpec:
    driver: str  # one of DRIVERS
    robot_id: str  # robot name in the deployment
    site: str = "local"  # hardware registry site
    task: str = "peg_insertion"  # sim: task in the scene
    task_params: Mapping[str, Any] | None = None  # sim: task config keys
    gym_env: str = ""  # gym: env id
    control_rate_hz: float = 10.0  # control rate
    realtime: bool = True  # sim: pace steps to the wall clock
    cameras: bool = False  # sim: render the scene cameras into observations
    privileged_state: bool = False  # sim: put the full task state into observations (scripted expert)
    max_steps: int = 0  # episode length; 0 = the task's own


@dataclass
class DriverBundle:
    robot: Robot
    scorer: Scorer
    task: str  # task name carried by observations
    extras: ExtrasFn | None = None
    privileged: TaskStateFn | None = None
    frames: FramesFn | None = None


def build_driver(spec: DriverSpec) -> DriverBundle:
    """Construct (not yet connect) the robot `spec` names."""
    if spec.driver == "gym":
        if not spec.gym_env:
            raise DriverError("driver gym needs gym_env (a gymnasium env id, e.g. Pendulum-v1)")
        gym = GymRobot(spec.gym_env, robot_id=spec.robot_id, control_rate_hz=spec.control_rate_hz, site=spec.site)
        return DriverBundle(gym, GymScorer(gym, spec.max_steps or GYM_MAX_STEPS), spec.gym_env)
    if spec.driver not in ("sim_franka", "sim_arx"):
        raise DriverError(f"unknown robot driver {spec.driver!r} (known: {', '.join(DRIVERS)})")
    if not spec.task:
        raise DriverError(f"driver {spec.driver} needs a task (reward and success come from it)")
    return _sim_bundle(spec)


def _sim_bundle(spec: DriverSpec) -> DriverBundle:
    base = arx_config(spec.task) if spec.driver == "sim_arx" else SimRobotConfig(task=spec.task)
    config = replace(
        base,
        robot_id=spec.robot_id,
        site=spec.site,
        task_params=dict(spec.task_params or {}) or base.task_params,
        realtime=spec.realtime,
        cameras=CameraConfig() if spec.cameras else CameraConfig(names=()),
        sim=replace(base.sim, control_rate_hz=spec.control_rate_hz),
    )
    robot: SimFrankaRobot = SimArxRobot(config) if spec.driver == "sim_arx" else SimFrankaRobot(config)
    task = robot.task
    if task is None:
        raise DriverError(f"simulated robot {spec.robot_id!r} has no task")

    def frames() -> dict[str, tuple[npt.NDArray[np.uint8], int]]:
        return {name: (frame.image, frame.stamp_ns) for name, frame in robot.frames().items()}

    return DriverBundle(
        robot=robot,
        scorer=TaskScorer(task, robot.task_state, spec.max_steps or None),
        task=spec.task,
        extras=robot.observation_extras,
        privileged=robot.task_state if spec.privileged_state else None,
        frames=frames if spec.cameras else None,
    )
