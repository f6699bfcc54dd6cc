"""Robot drivers by name, with what the control loop needs from each: scorer and observation sources.

Simulated: `sim_franka` / `sim_arx`, the MuJoCo work cells (task reward, extras, optional privileged state
and camera frames); `gym`, any gymnasium env id (the env's own reward and termination).

Real: `franka` (libfranka through franky, `FrankaLibfrankaRobot`), `franka_ros` (franka_ros2 topics over the
node's bus, `FrankaRosRobot`), `arx` (the ARX SDK, `ArxSdkRobot`). A real robot has no simulator task, so
its reward comes from `reward`: `rule` (`RuleReward` on the tool pose, settings in `rule`; success ends the
episode) or `external` (reward 0, a `reward` node downstream writes the reward, e.g. the human pedal; only
the step limit ends an episode). Images come from `camera_configs` (`user.cameras`: RealSense, OpenCV,
bus topics), opened and closed with the robot. Real drivers get no extras and no privileged state.

Hardware SDKs (franky, the ARX SDK, pyrealsense2, OpenCV) are imported only when a real driver is built.
`check_spec` parses every setting without building anything, so a deployment file is checked in full
before any process starts.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from user.config.strict import from_mapping
from user.rewards.rule import RuleReward, RuleRewardConfig
from user.robot_loop.observe import ExtrasFn, FramesFn, TaskStateFn
from user.robot_loop.scoring import ExternalScorer, GymScorer, RuleScorer, Scorer, TaskScorer
from user.robots.base import Robot
from user.robots.gym_robot import GymRobot
from user.robots.safety import SafetyConfig
from user.sim import SimArxRobot, SimCameraConfig, SimFrankaRobot, SimRobotConfig
from user.sim.robot import arx_config

if TYPE_CHECKING:  # user.cameras imports OpenCV: loaded only when a real driver has cameras
    from user.cameras.camera import Camera
    from user.cameras.config import CameraConfig as RealCameraConfig
    from user.runtime.node import Node

SIM_DRIVERS = ("sim_franka", "sim_arx", "gym")
REAL_DRIVERS = ("franka", "franka_ros", "arx")
DRIVERS = SIM_DRIVERS + REAL_DRIVERS
REWARDS = ("task", "rule", "external")  # task: sim and gym; rule, external: real drivers
GYM_MAX_STEPS = 200  # episode limit of gym envs when none is given (the env may truncate earlier)
REAL_MAX_STEPS = 200  # episode limit of real robots when none is given (20 s at 10 Hz)
HARDWARE_CONFIGS = {  # driver -> its config dataclass (module:name; the modules load no SDK at import)
    "franka": "user.robots.franka_libfranka:FrankaLibfrankaConfig",
    "franka_ros": "user.robots.franka_ros:FrankaRosConfig",
    "arx": "user.robots.arx_sdk:ArxSdkConfig",
}
_FROM_NODE_PARAMS = ("robot_id", "site", "control_rate_hz")  # hardware settings the node's own parameters fix
_STALE_WARN_PERIOD_S = 5.0
_log = logging.getLogger(__name__)


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
    max_steps: int = 0  # episode length; 0 = the task's own (gym: GYM_MAX_STEPS, real: REAL_MAX_STEPS)
    reward: str = "task"  # one of REWARDS
    rule: Mapping[str, Any] | None = None  # reward rule: RuleRewardConfig settings
    host: str = ""  # franka: address of the robot's Control unit (FCI)
    hardware: Mapping[str, Any] | None = None  # real: settings of the driver's config (HARDWARE_CONFIGS)
    camera_configs: Mapping[str, Mapping[str, Any]] | None = None  # real: camera name -> CameraConfig settings
    safety: Mapping[str, Any] | None = None  # sim arms: SafetyConfig settings (real arms: hardware.safety)


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


class CameraRig:
    """The real cameras of one robot; `frames` hands the newest frame of each to the observer, never waiting.

    A camera with no frame yet is left out of the observation; a stale frame is still handed out (its stamp
    tells its age) with a warning at most every few seconds, so a slow camera never stalls the arm.
    """

    def __init__(self, cameras: Sequence[Camera]) -> None:
        self.cameras = tuple(cameras)
        self._warned: dict[str, float] = {}  # camera -> when its last warning was logged (monotonic s)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.cameras)

    def open(self) -> None:
        """Open every camera and wait (at most each one's `open_timeout_s`) for its first frame."""
        try:
            for camera in self.cameras:
                camera.open()
            for camera in self.cameras:
                self._await_first_frame(camera)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        from user.cameras.errors import CameraError

        for camera in self.cameras:
            try:
                camera.close()
            except CameraError as exc:
                _log.warning("%s (closing the other cameras anyway)", exc)

    def frames(self) -> dict[str, tuple[npt.NDArray[np.uint8], int]]:
        out: dict[str, tuple[npt.NDArray[np.uint8], int]] = {}
        for camera in self.cameras:
            frame = camera.poll()
            if frame is None or frame.stale:
                self._warn(camera.name, "no frame yet" if frame is None else f"newest frame is {frame.age_s:.2f} s old")
            if frame is not None:
                out[camera.name] = (frame.rgb, frame.stamp_ns)
        return out

    def _await_first_frame(self, camera: Camera) -> None:
        from user.cameras.errors import CameraOpenError

        timeout_s = camera.config.open_timeout_s
        deadline = time.monotonic() + timeout_s
        waiter = threading.Event()  # never set: a deadline-bounded pause between polls
        while camera.poll(float("inf")) is None:
            if time.monotonic() >= deadline:
                raise CameraOpenError(camera.name, f"opened, but delivered no frame within {timeout_s:.1f} s")
            waiter.wait(min(camera.config.period_s, 0.05))

    def _warn(self, camera: str, what: str) -> None:
        now = time.monotonic()
        if now - self._warned.get(camera, -_STALE_WARN_PERIOD_S) >= _STALE_WARN_PERIOD_S:
            self._warned[camera] = now
            _log.warning("camera %r: %s; observations carry what there is", camera, what)


@dataclass(frozen=True)
class RealSettings:
    """The parsed settings of a real driver."""

    hardware: Any  # the driver's config dataclass (HARDWARE_CONFIGS)
    cameras: tuple[RealCameraConfig, ...] = ()
    rule: RuleRewardConfig | None = None  # reward rule; None: external


def check_spec(spec: DriverSpec) -> None:
    """Raise `DriverError` for settings that cannot work, without building or connecting anything."""
    if spec.driver not in DRIVERS:
        raise DriverError(f"unknown robot driver {spec.driver!r} (known: {', '.join(DRIVERS)})")
    if spec.reward not in REWARDS:
        raise DriverError(f"unknown reward {spec.reward!r} (known: {', '.join(REWARDS)})")
    if spec.driver in REAL_DRIVERS:
        real_settings(spec)
        return
    if spec.reward != "task":
        raise DriverError(f"reward {spec.reward!r} is for real drivers; driver {spec.driver} scores with its task")
    if spec.driver == "gym" and spec.safety:
        raise DriverError("safety is a setting of the arm drivers; driver gym has no Cartesian action limits")
    for name in ("rule", "host", "hardware", "camera_configs"):
        if getattr(spec, name):
            raise DriverError(f"{name} is a setting of the real drivers ({', '.join(REAL_DRIVERS)}), not {spec.driver}")


def real_settings(spec: DriverSpec) -> RealSettings:
    """Parse and check the settings of a real driver (`DriverError` naming the setting when one is wrong)."""
    what = f"driver {spec.driver}"
    sim_only = {
        "cameras": spec.cameras,
        "privileged_state": spec.privileged_state,
        "task_params": bool(spec.task_params),
        "gym_env": bool(spec.gym_env),
        "realtime: false": not spec.realtime,
        "safety (set hardware.safety)": bool(spec.safety),
    }
    for name, used in sim_only.items():
        if used:
            raise DriverError(f"{what}: {name} is a simulator setting; a real robot cannot use it")
    if spec.reward == "task":
        raise DriverError(
            f"{what}: a real robot has no task to score it; set reward to rule (with `rule`: target pose and "
            "tolerances) or external (a reward node writes the reward, e.g. from the foot pedal)"
        )
    if spec.reward != "rule" and spec.rule:
        raise DriverError(f"{what}: rule is set but reward is {spec.reward!r}; set reward: rule or remove rule")
    if spec.driver == "franka" and not spec.host:
        raise DriverError(f"{what} needs host: the IP address of the robot's Control unit (FCI), e.g. 172.16.0.2")
    if spec.driver != "franka" and spec.host:
        raise DriverError(f"{what}: host is a setting of driver franka only")
    cameras = _camera_configs(spec)
    fixed: dict[str, Any] = {"robot_id": spec.robot_id, "site": spec.site, "control_rate_hz": spec.control_rate_hz}
    if spec.driver == "franka":
        fixed["host"] = spec.host
    if spec.driver == "arx":
        fixed["cameras"] = [c.name for c in cameras]
    hardware = _parse(_hardware_class(spec.driver), _hardware_settings(spec, fixed), f"{what}: hardware")
    rule = _parse(RuleRewardConfig, dict(spec.rule or {}), f"{what}: rule") if spec.reward == "rule" else None
    if rule is not None and rule.mode != "step":
        raise DriverError(
            f"{what}: rule mode {rule.mode!r}: the robot scores every step (mode: step); "
            "score episode ends with a reward node (source rule) instead"
        )
    return RealSettings(hardware, cameras, rule)


def _hardware_class(driver: str) -> type[Any]:
    module, _, name = HARDWARE_CONFIGS[driver].partition(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls


def _hardware_settings(spec: DriverSpec, fixed: Mapping[str, Any]) -> dict[str, Any]:
    settings = dict(spec.hardware or {})
    for key in fixed:
        if key in settings:
            raise DriverError(f"driver {spec.driver}: hardware.{key}: set it as the robot node's `{key}` parameter")
    return {**settings, **fixed}


def _camera_configs(spec: DriverSpec) -> tuple[RealCameraConfig, ...]:
    if not spec.camera_configs:
        return ()
    from user.cameras.config import CameraConfig as RealCameraConfig

    configs = []
    for name, settings in (spec.camera_configs or {}).items():
        where = f"driver {spec.driver}: camera_configs.{name}"
        if not isinstance(settings, Mapping):
            raise DriverError(f"{where}: expected the camera's settings (a mapping), got {type(settings).__name__}")
        if settings.get("name", name) != name:
            raise DriverError(f"{where}: name {settings['name']!r} differs from its key; leave name out")
        config = _parse(RealCameraConfig, {**settings, "name": name}, where)
        if config.driver == "source":
            raise DriverError(f"{where}: driver 'source' is for simulators; use realsense, opencv or bus")
        configs.append(config)
    return tuple(configs)


def _parse(cls: type[Any], data: Mapping[str, Any], where: str) -> Any:
    try:
        return from_mapping(cls, data, where=where)
    except ValueError as exc:  # ConfigError, and validation errors of the dataclass
        raise DriverError(str(exc)) from exc


def build_driver(spec: DriverSpec, node: Node | None = None) -> DriverBundle:
    """Construct (not yet connect) the robot `spec` names; `node` is needed by franka_ros and bus cameras."""
    check_spec(spec)
    if spec.driver in REAL_DRIVERS:
        return _real_bundle(spec, real_settings(spec), node)
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


def _sim_safety(spec: DriverSpec, base: SafetyConfig) -> SafetyConfig:
    """The simulated arm's action limits: its defaults with the node's `safety` settings on top."""
    if not spec.safety:
        return base
    merged = {f.name: getattr(base, f.name) for f in fields(SafetyConfig)} | dict(spec.safety)
    config: SafetyConfig = _parse(SafetyConfig, merged, f"driver {spec.driver}: safety")
    return config


def _sim_bundle(spec: DriverSpec) -> DriverBundle:
    base = arx_config(spec.task) if spec.driver == "sim_arx" else SimRobotConfig(task=spec.task)
    config = replace(
        base,
        robot_id=spec.robot_id,
        site=spec.site,
        task_params=dict(spec.task_params or {}) or base.task_params,
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


def _camera(config: RealCameraConfig, node: Node | None) -> Camera:
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
