"""`FrankaLibfrankaConfig`: the settings of a Franka arm driven through franky (`user.robots.franka_libfranka`).

Apart from the driver, so that reading them (a robot node's `hardware` with driver franka) loads no driver code.
`controller` picks how set-points are streamed: impedance (compliant, the default) or waypoint (stiff); the driver's
docstring says what each costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from user.config import ConfigError, setting
from user.robots.safety import SafetyConfig

CONTROLLERS = ("impedance", "waypoint")  # how set-points are streamed (module docstring)
READY_JOINTS = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)


@dataclass(frozen=True)
class FrankaLibfrankaConfig:
    """A Franka arm (and optional Franka Hand) reached over FCI with franky."""

    robot_id: str = setting("franka", "unique robot name in the deployment")
    site: str = setting("local", "where the robot is (hardware registry)")
    model: str = setting("franka_fr3", "arm model announced to the registry", choices=("franka_fr3", "franka_panda"))
    host: str = setting("172.16.0.2", "IP address or host name of the robot's Control unit (FCI)")
    ignore_realtime: bool = setting(False, "skip libfranka's real-time kernel check (RealtimeConfig.Ignore): sims")
    controller: str = setting("impedance", "impedance (compliant) or waypoint (stiff)", choices=CONTROLLERS)
    control_rate_hz: float = setting(10.0, "step() rate; each step sleeps to keep it (Hz)", min=1.0, max=1000.0)
    dynamics_factor: float = setting(0.2, "share of the speed limits for reset/waypoint motions", min=0.01, max=1.0)
    translational_stiffness: float = setting(2000.0, "impedance stiffness along x, y, z (N/m)", min=10.0, max=5000.0)
    rotational_stiffness: float = setting(150.0, "impedance stiffness about x, y, z (Nm/rad)", min=1.0, max=500.0)
    translational_error_clip_m: float = setting(0.03, "impedance position error clip (m)", min=1e-3, max=0.2)
    rotational_error_clip_rad: float = setting(0.2, "orientation error clip of the impedance (rad)", min=0.01, max=1.0)
    torque_threshold_nm: float = setting(20.0, "joint torque that triggers the collision reflex (Nm)", min=1.0)
    force_threshold_n: float = setting(30.0, "TCP force that triggers the collision reflex (N)", min=1.0)
    home_joints: tuple[float, ...] = setting(READY_JOINTS, "the 7 joint angles reset() moves to (rad)")
    reset_jitter_m: float = setting(0.0, "seeded reset(): random start TCP shift in x, y, up to (m)", min=0.0, max=0.1)
    reset_timeout_s: float = setting(20.0, "longest a reset motion may take before it is stopped (s)", min=1.0)
    connect_timeout_s: float = setting(3.0, "how long connect() waits for the robot to answer (s)", min=0.1, max=60.0)
    gripper: bool = setting(True, "a Franka Hand is attached and commanded")
    gripper_speed: float = setting(0.05, "finger speed (m/s)", min=0.001, max=0.2)
    gripper_force: float = setting(20.0, "grasp force when closing (N)", min=1.0, max=140.0)
    gripper_deadband: float = setting(0.05, "smallest gripper target change (0..1) sent to the hand", min=0.0, max=1.0)
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")

    def __post_init__(self) -> None:
        if len(self.home_joints) != 7 or not all(math.isfinite(v) for v in self.home_joints):
            raise ConfigError(f"home_joints must be 7 finite joint angles (rad), got {self.home_joints!r}")
        if not self.host:
            raise ConfigError("host must name the robot's Control unit, e.g. 172.16.0.2")
