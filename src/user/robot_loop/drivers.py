"""Robot drivers built from their settings (`DriverSpec`), with what the control loop needs from each:
the robot, its scorer and its observation sources (extras, privileged state, camera frames).

`build_driver` calls the builder `DRIVERS` (`user.robot_loop.driver_spec`) names for the driver, one `build_*`
function below per driver, each given the parsed settings (`spec.hardware` is the driver's config, `spec.task_params`
the task's, `spec.camera_configs` the cameras'). Hardware SDKs (franky, the ARX SDK, pyrealsense2, OpenCV) are
imported only when a real driver is built; the settings are checked in full when they are loaded, without building
anything, so a deployment file is checked before any process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from user.config.sections import settings_of
from user.rewards.rule import RuleReward
from user.robot_loop.camera_rig import CameraRig
from user.robot_loop.driver_spec import DRIVERS, DriverError, DriverSpec
from user.robot_loop.observe import CameraFrames, ExtrasFn, FramesFn, TaskStateFn
from user.robot_loop.scoring import ExternalScorer, GymScorer, RuleScorer, Scorer, TaskScorer
from user.robots.arx_sdk import ArxSdkConfig
from user.robots.base import Robot
from user.robots.franka_libfranka_config import FrankaLibfrankaConfig
from user.robots.franka_ros_config import FrankaRosConfig
from user.robots.gym_robot import GymRobot
from user.sim import SimArxRobot, SimCameraConfig, SimFrankaRobot, SimRobotConfig
from user.sim.robot import arx_config
from user.tasks.base import ActionScale
from user.tasks.registry import make_task

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
    paced: bool = True  # in real time, the robot's step keeps the control rate itself (a gym env's does not)

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
    builder: Callable[[DriverSpec, Node | None], DriverBundle] = DRIVERS[spec.driver].builder()
    return builder(spec, node)


def build_gym(spec: DriverSpec, node: Node | None) -> DriverBundle:
    del node
    gym = GymRobot(spec.gym_env, robot_id=spec.robot_id, control_rate_hz=spec.control_rate_hz, site=spec.site)
    return DriverBundle(gym, GymScorer(gym, _gym_max_steps(spec, gym)), spec.gym_env, paced=False)


def _gym_max_steps(spec: DriverSpec, gym: GymRobot) -> int:
    """A gym robot's episode limit: `max_steps` when given, else the env's own (its TimeLimit, e.g. 1000 for
    InvertedPendulum), else `GYM_MAX_STEPS`. A limit above the env's own is cut short by the env's TimeLimit."""
    return spec.max_steps or gym.max_episode_steps or GYM_MAX_STEPS


def build_sim_franka(spec: DriverSpec, node: Node | None) -> DriverBundle:
    del node
    return _sim_arm(spec, SimRobotConfig(task=spec.task), SimFrankaRobot)


def build_sim_arx(spec: DriverSpec, node: Node | None) -> DriverBundle:
    del node
    return _sim_arm(spec, arx_config(spec.task), SimArxRobot)


def _sim_arm(spec: DriverSpec, base: SimRobotConfig, make: type[SimFrankaRobot]) -> DriverBundle:
    """A simulated arm work cell: its defaults (`base`) with the node's settings; a task built from `task_params`
    when they are given, else the work cell's own."""
    config = replace(
        base,
        robot_id=spec.robot_id,
        site=spec.site,
        realtime=spec.realtime,
        cameras=SimCameraConfig() if spec.cameras else SimCameraConfig(names=()),
        sim=replace(base.sim, control_rate_hz=spec.control_rate_hz),
        safety=spec.safety,
    )
    given = None if spec.task_params is None else make_task(spec.task, spec.task_params, ActionScale.of(spec.safety))
    robot = make(config, given)
    task = robot.task
    if task is None:
        raise DriverError(f"simulated robot {spec.robot_id!r} has no task")

    names = config.cameras.names

    def frames() -> CameraFrames:
        """The scene cameras' newest frames; a camera that has rendered none yet (its render thread just started)
        is a fault: the robot holds rather than act and record a step without it."""
        got = robot.frames()
        fault = "; ".join(f"camera {name!r}: no frame yet" for name in names if name not in got)
        return CameraFrames({name: (frame.image, frame.stamp_ns) for name, frame in got.items()}, fault)

    return DriverBundle(
        robot=robot,
        scorer=TaskScorer(task, robot.task_state, spec.max_steps or None),
        task=spec.task,
        extras=robot.observation_extras,
        privileged=robot.task_state if spec.privileged_state else None,
        frames=frames if spec.cameras else None,
        cameras=robot.descriptor.cameras if spec.cameras else (),
    )


def build_franka(spec: DriverSpec, node: Node | None) -> DriverBundle:
    from user.robots.franka_libfranka import FrankaLibfrankaRobot  # franky itself loads on connect()

    return _real_bundle(spec, FrankaLibfrankaRobot(settings_of(spec.hardware, FrankaLibfrankaConfig, "hardware")), node)


def build_franka_ros(spec: DriverSpec, node: Node | None) -> DriverBundle:
    from user.robots.franka_ros import FrankaRosRobot

    if node is None:
        raise DriverError("driver franka_ros reads and commands franka_ros2 over a bus; build it in a node")
    robot = FrankaRosRobot(node, settings_of(spec.hardware, FrankaRosConfig, "hardware"))
    return _real_bundle(spec, robot, node, over_bus=True)


def build_arx(spec: DriverSpec, node: Node | None) -> DriverBundle:
    from user.robots.arx_sdk import ArxSdkRobot  # the SDK itself loads on connect()

    return _real_bundle(spec, ArxSdkRobot(settings_of(spec.hardware, ArxSdkConfig, "hardware")), node)


def _real_bundle(spec: DriverSpec, robot: Robot, node: Node | None, over_bus: bool = False) -> DriverBundle:
    """A real robot with its cameras and the scorer its `reward` names; `over_bus`: it connects over the bus."""
    cameras = tuple(spec.camera_configs.values())
    over_bus = over_bus or any(c.driver == "bus" for c in cameras)
    if node is None and over_bus:
        raise DriverError(f"driver {spec.driver}: franka_ros and bus cameras talk over a bus; build it in a node")
    max_steps = spec.max_steps or REAL_MAX_STEPS
    scorer: Scorer = ExternalScorer(max_steps)
    if spec.reward == "rule":
        scorer = RuleScorer(RuleReward(spec.rule), max_steps)
    rig = CameraRig([_camera(c, node) for c in cameras]) if cameras else None
    return DriverBundle(
        robot=robot,
        scorer=scorer,
        task=spec.task,
        frames=rig.frames if rig is not None else None,
        cameras=rig.names if rig is not None else (),
        rig=rig,
        connects_over_bus=over_bus,
    )


def _camera(config: CameraConfig, node: Node | None) -> Camera:
    from user.cameras.factory import build_camera  # OpenCV and the RealSense driver: only on real robots

    if node is None:
        return build_camera(config)
    return build_camera(config, bus=node.bus, codec=node.codec)
