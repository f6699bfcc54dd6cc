"""Robot drivers built from their settings (`DriverSpec`), with what the control loop needs from each:
the robot, its scorer and its observation sources (extras, privileged state, camera frames).

Hardware SDKs (franky, the ARX SDK, pyrealsense2, OpenCV) are imported only when a real driver is built;
`user.robot_loop.driver_spec` checks every setting without building anything, so a deployment file is checked
in full before any process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from user.rewards.rule import RuleReward
from user.robot_loop.camera_rig import CameraRig
from user.robot_loop.driver_spec import (
    REAL_DRIVERS,
    DriverError,
    DriverSpec,
    RealSettings,
    parse_settings,
    real_settings,
)
from user.robot_loop.observe import ExtrasFn, FramesFn, TaskStateFn
from user.robot_loop.scoring import ExternalScorer, GymScorer, RuleScorer, Scorer, TaskScorer
from user.robots.base import Robot
from user.robots.gym_robot import GymRobot
from user.robots.safety import SafetyConfig
from user.sim import SimArxRobot, SimCameraConfig, SimFrankaRobot, SimRobotConfig
from user.sim.robot import arx_config

if TYPE_CHECKING:
    from user.cameras.camera import Camera
    from user.cameras.config import CameraConfig
    from user.runtime.node import Node

GYM_MAX_STEPS = 200  # episode limit of a gym env with no limit of its own when none is given
REAL_MAX_STEPS = 200  # episode limit of real robots when none is given (20 s at 10 Hz)


@dataclass
class DriverBundle:
    robot: Robot
    scorer: Scorer
    task: str  # task name carried by observations
    extras: ExtrasFn | None = None
    privileged: TaskStateFn | None = None
    frames: FramesFn | None = None
    cameras: tuple[str, ...] = ()  # names of the cameras whose images observations carry
    rig: CameraRig | None = None  # real cameras, opened by `connect` and closed by `close`
    connects_over_bus: bool = False  # `connect` waits for bus messages: call it where bus callbacks can run

    def connect(self) -> None:
        """Connect the robot, then open its cameras (the robot is closed again when a camera fails)."""
        self.robot.connect()
        if self.rig is not None:
            try:
                self.rig.open()
            except BaseException:
                self.robot.close()
                raise

    def close(self) -> None:
        """Close the cameras, then the robot."""
        try:
            if self.rig is not None:
                self.rig.close()
        finally:
            self.robot.close()


def build_driver(spec: DriverSpec, node: Node | None = None) -> DriverBundle:
    """Construct (not yet connect) the robot `spec` names; `node` is needed by franka_ros and bus cameras.
    The spec was checked when it was made (`DriverSpec.__post_init__`)."""
    if spec.driver in REAL_DRIVERS:
        return _real_bundle(spec, real_settings(spec), node)
    if spec.driver == "gym":
        return _gym_bundle(spec)
    return _sim_bundle(spec)


def _gym_bundle(spec: DriverSpec) -> DriverBundle:
    gym = GymRobot(spec.gym_env, robot_id=spec.robot_id, control_rate_hz=spec.control_rate_hz, site=spec.site)
    return DriverBundle(gym, GymScorer(gym, _gym_max_steps(spec, gym)), spec.gym_env)


def _gym_max_steps(spec: DriverSpec, gym: GymRobot) -> int:
    """A gym robot's episode limit: `max_steps` when given, else the env's own (its TimeLimit, e.g. 1000 for
    InvertedPendulum), else `GYM_MAX_STEPS`. A limit above the env's own is cut short by the env's TimeLimit."""
    return spec.max_steps or gym.max_episode_steps or GYM_MAX_STEPS


def _sim_safety(spec: DriverSpec, base: SafetyConfig) -> SafetyConfig:
    """The simulated arm's action limits: its defaults with the node's `safety` settings on top."""
    if not spec.safety:
        return base
    merged = {f.name: getattr(base, f.name) for f in fields(SafetyConfig)} | dict(spec.safety)
    config: SafetyConfig = parse_settings(SafetyConfig, merged, f"driver {spec.driver}: safety")
    return config


def _sim_bundle(spec: DriverSpec) -> DriverBundle:
    base = arx_config(spec.task) if spec.driver == "sim_arx" else SimRobotConfig(task=spec.task)
    config = replace(
        base,
        robot_id=spec.robot_id,
        site=spec.site,
        task_params=dict(spec.task_params) or base.task_params,
        realtime=spec.realtime,
        cameras=SimCameraConfig() if spec.cameras else SimCameraConfig(names=()),
        sim=replace(base.sim, control_rate_hz=spec.control_rate_hz),
        safety=_sim_safety(spec, base.safety),
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
        cameras=robot.descriptor.cameras if spec.cameras else (),
    )


def _real_bundle(spec: DriverSpec, settings: RealSettings, node: Node | None) -> DriverBundle:
    if node is None and (spec.driver == "franka_ros" or any(c.driver == "bus" for c in settings.cameras)):
        raise DriverError(f"driver {spec.driver}: franka_ros and bus cameras talk over a bus; build it in a node")
    max_steps = spec.max_steps or REAL_MAX_STEPS
    scorer: Scorer = ExternalScorer(max_steps)
    if settings.rule is not None:
        scorer = RuleScorer(RuleReward(settings.rule), max_steps)
    rig = CameraRig([_camera(c, node) for c in settings.cameras]) if settings.cameras else None
    return DriverBundle(
        robot=_REAL_ROBOTS[spec.driver](settings.hardware, node),
        scorer=scorer,
        task=spec.task,
        frames=rig.frames if rig is not None else None,
        cameras=rig.names if rig is not None else (),
        rig=rig,
        connects_over_bus=spec.driver == "franka_ros" or any(c.driver == "bus" for c in settings.cameras),
    )


def _camera(config: CameraConfig, node: Node | None) -> Camera:
    from user.cameras.factory import build_camera  # OpenCV and the RealSense driver: only on real robots

    if node is None:
        return build_camera(config)
    return build_camera(config, bus=node.bus, codec=node.codec)


def _franka(config: Any, node: Node | None) -> Robot:
    del node
    from user.robots.franka_libfranka import FrankaLibfrankaRobot  # franky itself loads on connect()

    return FrankaLibfrankaRobot(config)


def _franka_ros(config: Any, node: Node | None) -> Robot:
    from user.robots.franka_ros import FrankaRosRobot

    if node is None:
        raise DriverError("driver franka_ros reads and commands franka_ros2 over a bus; build it in a node")
    return FrankaRosRobot(node, config)


def _arx(config: Any, node: Node | None) -> Robot:
    del node
    from user.robots.arx_sdk import ArxSdkRobot  # the SDK itself loads on connect()

    return ArxSdkRobot(config)


_REAL_ROBOTS: dict[str, Callable[[Any, Node | None], Robot]] = {
    "franka": _franka,
    "franka_ros": _franka_ros,
    "arx": _arx,
}
