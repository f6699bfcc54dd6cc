"""Which robot a robot node drives, and the settings of that driver: one typed choice, checked at load.

`driver` selects the kind; a setting another kind uses (a simulator's `cameras` on a real arm, a real arm's
`host` in a simulator) is an error naming it when the settings are loaded (`setting(..., when=...)`), and
`check_spec` adds what one key alone cannot say (a real robot needs a rule or external reward, libfranka
needs its host, the hardware and camera sections parse into their drivers' configs). The robot node's
parameters are these settings plus the node's own (`user.nodes.parts.robot_params.RobotNodeParams` extends
`DriverSpec`).

Simulated: `sim_franka` / `sim_arx`, the MuJoCo work cells (task reward, extras, optional privileged state
and camera frames); `gym`, any gymnasium env id (the env's own reward and termination).

Real: `franka` (libfranka through franky), `franka_ros` (franka_ros2 topics over the node's bus), `arx` (the
ARX SDK). A real robot has no simulator task, so its reward comes from `reward`: `rule` (`RuleReward` on the
tool pose, settings in `rule`; success ends the episode) or `external` (reward 0, a `reward` node downstream
writes the reward, e.g. the human pedal; only the step limit ends an episode). Images come from
`camera_configs` (`user.cameras`: RealSense, OpenCV, bus topics). Real drivers get no extras and no
privileged state. Nothing here imports a hardware SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from user.config.strict import ConfigError, from_mapping, setting
from user.rewards.rule import RuleRewardConfig

if TYPE_CHECKING:  # user.cameras imports OpenCV: loaded only when a real driver has cameras
    from user.cameras.config import CameraConfig

SIM_ARMS = ("sim_franka", "sim_arx")
SIM_DRIVERS = (*SIM_ARMS, "gym")
REAL_DRIVERS = ("franka", "franka_ros", "arx")
DRIVERS = SIM_DRIVERS + REAL_DRIVERS
HARDWARE_CONFIGS = {  # driver -> its config dataclass (module:name; the modules load no SDK at import)
    "franka": "user.robots.franka_libfranka:FrankaLibfrankaConfig",
    "franka_ros": "user.robots.franka_ros:FrankaRosConfig",
    "arx": "user.robots.arx_sdk:ArxSdkConfig",
}
DriverKind = Literal["sim_franka", "sim_arx", "gym", "franka", "franka_ros", "arx"]


class DriverError(ConfigError):
    """The robot driver settings do not describe a robot that can be built."""


@dataclass(frozen=True)
class DriverSpec:
    """The robot: its driver and the settings of that driver."""

    robot_id: str = setting("franka_sim", "unique robot name in the deployment; topics default to /<robot_id>/...")
    driver: DriverKind = setting(
        "sim_franka",
        "robot driver: sim_franka, sim_arx, gym (simulated); franka (libfranka), franka_ros (franka_ros2), arx (SDK)",
    )
    site: str = setting("local", "where the robot is (hardware registry)")
    control_rate_hz: float = setting(10.0, "control rate, Hz", min=0.1, max=1000.0)
    realtime: bool = setting(
        True, "true: pace to the control rate; false (simulated drivers): lockstep with the policy"
    )
    max_steps: int = setting(
        0,
        "episode length limit, steps; 0 = the task's own: a sim task's limit; gym: the env's registered limit "
        "(spec.max_episode_steps, e.g. 1000 for InvertedPendulum), 200 for an env without one; real drivers: 200",
        min=0,
    )
    task: str = setting(
        "peg_insertion",
        "sim arms: task (peg_insertion, pick_place, button_press); real drivers: task name only",
        when=("driver", (*SIM_ARMS, *REAL_DRIVERS)),
    )
    task_params: dict[str, Any] = setting({}, "sim arms: settings of the task's config", when=("driver", SIM_ARMS))
    cameras: bool = setting(
        False, "sim arms: render the scene cameras into observations and image topics", when=("driver", SIM_ARMS)
    )
    privileged_state: bool = setting(
        False, "sim arms: add the full task state to observations (scripted expert)", when=("driver", SIM_ARMS)
    )
    safety: dict[str, Any] = setting(
        {},
        "sim arms: action limits on top of the arm's defaults (user.robots.safety SafetyConfig: workspace_min/max, "
        "gripper_min/max, nominal_orientation, max_orientation_deviation_rad, ...); real arms: hardware.safety",
        when=("driver", SIM_ARMS),
    )
    gym_env: str = setting("", "driver gym: the gymnasium env id, e.g. Pendulum-v1", when=("driver", "gym"))
    reward: Literal["task", "rule", "external"] = setting(
        "task",
        "task: the sim task's or gym env's own (simulated drivers); real drivers: rule (distance of the tool to "
        "the `rule` target; success ends the episode) or external (0; a reward node writes it, e.g. the foot pedal)",
    )
    rule: RuleRewardConfig = setting(
        RuleRewardConfig(), "reward rule: the rule reward (target pose, tolerances; mode step)", when=("reward", "rule")
    )
    host: str = setting(
        "", "driver franka: IP address or host name of the robot's Control unit (FCI)", when=("driver", "franka")
    )
    hardware: dict[str, Any] = setting(
        {},
        "real drivers: settings of the driver's config (franka: FrankaLibfrankaConfig, franka_ros: FrankaRosConfig, "
        "arx: ArxSdkConfig; e.g. safety, controller, interface) except robot_id, site, control_rate_hz and host, "
        "which are this node's own parameters",
        when=("driver", REAL_DRIVERS),
    )
    camera_configs: dict[str, dict[str, Any]] = setting(
        {},
        "real drivers: camera name -> its settings (user.cameras CameraConfig: driver realsense/opencv/bus, "
        "serial, device, topic, width, height, rate_hz, resize, ...); their images go into observations",
        when=("driver", REAL_DRIVERS),
    )

    def __post_init__(self) -> None:
        check_spec(self)


@dataclass(frozen=True)
class RealSettings:
    """The parsed settings of a real driver."""

    hardware: Any  # the driver's config dataclass (HARDWARE_CONFIGS)
    cameras: tuple[CameraConfig, ...] = ()
    rule: RuleRewardConfig | None = None  # reward rule; None: external


def check_spec(spec: DriverSpec) -> None:
    """Raise `DriverError` for settings that cannot work together, without building or connecting anything."""
    if spec.driver in REAL_DRIVERS:
        real_settings(spec)
    elif spec.reward != "task":
        raise DriverError(f"reward {spec.reward!r} is for real drivers; driver {spec.driver} scores with its task")
    elif spec.driver == "gym" and not spec.gym_env:
        raise DriverError("driver gym needs gym_env (a gymnasium env id, e.g. Pendulum-v1)")
    elif spec.driver != "gym" and not spec.task:
        raise DriverError(f"driver {spec.driver} needs a task (reward and success come from it)")


def real_settings(spec: DriverSpec) -> RealSettings:
    """Parse and check the settings of a real driver (`DriverError` naming the setting when one is wrong)."""
    what = f"driver {spec.driver}"
    if not spec.realtime:
        raise DriverError(f"{what}: realtime: false is a simulator setting; a real robot cannot use it")
    if spec.reward == "task":
        raise DriverError(
            f"{what}: a real robot has no task to score it; set reward to rule (with `rule`: target pose and "
            "tolerances) or external (a reward node writes the reward, e.g. from the foot pedal)"
        )
    if spec.reward == "rule" and spec.rule.mode != "step":
        raise DriverError(
            f"{what}: rule mode {spec.rule.mode!r}: the robot scores every step (mode: step); "
            "score episode ends with a reward node (source rule) instead"
        )
    if spec.driver == "franka" and not spec.host:
        raise DriverError(f"{what} needs host: the IP address of the robot's Control unit (FCI), e.g. 172.16.0.2")
    cameras = _camera_configs(spec)
    fixed: dict[str, Any] = {"robot_id": spec.robot_id, "site": spec.site, "control_rate_hz": spec.control_rate_hz}
    if spec.driver == "franka":
        fixed["host"] = spec.host
    if spec.driver == "arx":
        fixed["cameras"] = [c.name for c in cameras]
    hardware = parse_settings(_hardware_class(spec.driver), _hardware_settings(spec, fixed), f"{what}: hardware")
    return RealSettings(hardware, cameras, spec.rule if spec.reward == "rule" else None)


def _hardware_class(driver: str) -> type[Any]:
    module, _, name = HARDWARE_CONFIGS[driver].partition(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls


def _hardware_settings(spec: DriverSpec, fixed: Mapping[str, Any]) -> dict[str, Any]:
    settings = dict(spec.hardware)
    for key in fixed:
        if key in settings:
            raise DriverError(f"driver {spec.driver}: hardware.{key}: set it as the robot node's `{key}` parameter")
    return {**settings, **fixed}


def _camera_configs(spec: DriverSpec) -> tuple[CameraConfig, ...]:
    if not spec.camera_configs:
        return ()
    from user.cameras.config import CameraConfig

    configs = []
    for name, settings in spec.camera_configs.items():
        where = f"driver {spec.driver}: camera_configs.{name}"
        if not isinstance(settings, Mapping):
            raise DriverError(f"{where}: expected the camera's settings (a mapping), got {type(settings).__name__}")
        if settings.get("name", name) != name:
            raise DriverError(f"{where}: name {settings['name']!r} differs from its key; leave name out")
        config = parse_settings(CameraConfig, {**settings, "name": name}, where)
        if config.driver == "source":
            raise DriverError(f"{where}: driver 'source' is for simulators; use realsense, opencv or bus")
        configs.append(config)
    return tuple(configs)


def parse_settings(cls: type[Any], data: Mapping[str, Any], where: str) -> Any:
    """`from_mapping` for a section held as a mapping (hardware, cameras, safety), errors as `DriverError`."""
    try:
        return from_mapping(cls, data, where=where)
    except ValueError as exc:  # ConfigError, and validation errors of the dataclass
        raise DriverError(str(exc)) from exc
