"""Which robot a robot node drives, and the settings of that driver: one typed choice, checked at load.

`driver` selects the kind from `DRIVERS`, the one table of drivers: each one's family (simulated arm, gym env, real
robot), the class of its `hardware` settings (real robots) and the function of `user.robot_loop.drivers` that builds
it. A setting another kind uses (a simulator's `cameras` on a real arm, a real arm's `host` in a simulator) is an error
naming it when the settings are loaded (`setting(..., when=...)`); the sections parse into their classes then too
(`user.config.sections`): `hardware` into the selected driver's config, `task_params` into the selected task's,
`camera_configs` into one `CameraConfig` per camera, `safety` into a `SafetyConfig`, each error naming its key path.
`check_spec` adds what one key alone cannot say (a real robot needs a rule or external reward, libfranka needs its
host). The robot node's parameters are these settings plus the node's own
(`user.nodes.parts.robot_params.RobotNodeParams` extends `DriverSpec`).

Simulated: `sim_franka` / `sim_arx`, the MuJoCo work cells (task reward, extras, optional privileged state
and camera frames); `gym`, any gymnasium env id (the env's own reward and termination).

Real: `franka` (libfranka through franky), `franka_ros` (franka_ros2 topics over the node's bus), `arx` (the
ARX SDK). A real robot has no simulator task, so its reward comes from `reward`: `rule` (`RuleReward` on the
tool pose, settings in `rule`; success ends the episode) or `external` (reward 0, a `reward` node downstream
writes the reward, e.g. the human pedal; only the step limit ends an episode). Images come from
`camera_configs` (`user.cameras`: RealSense, OpenCV, bus topics). Real drivers get no extras and no
privileged state. Nothing here imports a hardware SDK or OpenCV.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from user.cameras.config import CameraConfig
from user.config import Kind, Kinds, KindSection, NamedSections, resolve_sections
from user.config.strict import ConfigError, setting
from user.rewards.rule import RuleRewardConfig
from user.robots.safety import SafetyConfig
from user.tasks.registry import TASKS


@dataclass(frozen=True)
class Driver(Kind):
    """A robot driver: its family, the class of its `hardware` settings (real robots only) and its builder
    (`(spec, node) -> DriverBundle`, in `user.robot_loop.drivers`)."""

    family: Literal["sim_arm", "gym", "real"] = "real"


_BUILD = "user.robot_loop.drivers:"
DRIVERS: Kinds[Driver] = Kinds(
    "driver",
    {
        "sim_franka": Driver(build=f"{_BUILD}build_sim_franka", family="sim_arm"),
        "sim_arx": Driver(build=f"{_BUILD}build_sim_arx", family="sim_arm"),
        "gym": Driver(build=f"{_BUILD}build_gym", family="gym"),
        "franka": Driver("user.robots.franka_libfranka_config:FrankaLibfrankaConfig", f"{_BUILD}build_franka"),
        "franka_ros": Driver("user.robots.franka_ros:FrankaRosConfig", f"{_BUILD}build_franka_ros"),
        "arx": Driver("user.robots.arx_sdk:ArxSdkConfig", f"{_BUILD}build_arx"),
    },
)
SIM_ARMS = tuple(name for name, driver in DRIVERS.items() if driver.family == "sim_arm")
REAL_DRIVERS = tuple(name for name, driver in DRIVERS.items() if driver.family == "real")
NODE_OWNED = ("robot_id", "site", "control_rate_hz", "host")  # a driver's settings the node's own parameters give


class DriverError(ConfigError):
    """The robot driver settings do not describe a robot that can be built."""


@dataclass(frozen=True)
class DriverSpec:
    """The robot: its driver and the settings of that driver."""

    robot_id: str = setting("franka_sim", "unique robot name in the deployment; topics default to /<robot_id>/...")
    driver: str = setting(
        "sim_franka",
        "robot driver: sim_franka, sim_arx, gym (simulated); franka (libfranka), franka_ros (franka_ros2), arx (SDK)",
        choices=DRIVERS.names,
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
    task_params: object | None = setting(
        None,
        "sim arms: settings of the task's config (the class `task` selects); none: the arm's own layout of the task",
        when=("driver", SIM_ARMS),
        section=KindSection(TASKS, optional=True),
    )
    cameras: bool = setting(
        False, "sim arms: render the scene cameras into observations and image topics", when=("driver", SIM_ARMS)
    )
    privileged_state: bool = setting(
        False, "sim arms: add the full task state to observations (scripted expert)", when=("driver", SIM_ARMS)
    )
    safety: SafetyConfig = setting(
        SafetyConfig(), "sim arms: action limits (real arms: hardware.safety)", when=("driver", SIM_ARMS)
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
    hardware: object | None = setting(
        None,
        "real drivers: the driver's settings (the class `driver` selects) except robot_id, site, control_rate_hz "
        "and host, which are this node's own parameters",
        when=("driver", REAL_DRIVERS),
        section=KindSection(DRIVERS, shared=NODE_OWNED),
    )
    camera_configs: dict[str, CameraConfig] = setting(
        {},
        "real drivers: camera name -> its settings; their images go into observations",
        when=("driver", REAL_DRIVERS),
        section=NamedSections(CameraConfig, key="name"),
    )

    def __post_init__(self) -> None:
        check_spec(self)  # first: what the sections' classes would report less clearly (a missing host)
        resolve_sections(self)
        for name, camera in self.camera_configs.items():
            if camera.driver == "source":
                use = "use realsense, opencv or bus"
                raise DriverError(f"camera_configs.{name}: driver 'source' is for simulators; {use}")


def check_spec(spec: DriverSpec) -> None:
    """Raise `DriverError` for settings that cannot work together, without building or connecting anything."""
    if spec.driver not in DRIVERS:
        raise DriverError(f"driver: {spec.driver!r} is not one of {', '.join(map(repr, DRIVERS))}")
    family = DRIVERS[spec.driver].family
    if family == "real":
        _check_real(spec)
    elif spec.reward != "task":
        raise DriverError(f"reward {spec.reward!r} is for real drivers; driver {spec.driver} scores with its task")
    elif family == "gym" and not spec.gym_env:
        raise DriverError("driver gym needs gym_env (a gymnasium env id, e.g. Pendulum-v1)")
    elif family == "sim_arm" and spec.task not in TASKS:
        raise DriverError(
            f"driver {spec.driver} needs a task (reward and success come from it): one of {', '.join(TASKS)}, "
            f"not {spec.task!r}"
        )


def _check_real(spec: DriverSpec) -> None:
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
