"""The settings and typed errors of the franka_ros2 driver (`user.robots.franka_ros`), and the message types it uses."""

from __future__ import annotations

from dataclasses import dataclass

from user.config import ConfigError, setting
from user.robots.base import RobotError
from user.robots.safety import SafetyConfig

POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64 = "std_msgs/msg/Float64"
ERROR_RECOVERY = "franka_msgs/action/ErrorRecovery"


class FrankaRosError(RobotError):
    """franka_ros2 did not provide what the driver needs; the message names the topic."""


class FrankaRosTimeoutError(FrankaRosError):
    """franka_ros2 did not publish its state within the deadline (not running, or topics not remapped)."""


class FrankaRosStateError(FrankaRosError):
    """The state franka_ros2 published is stale or unusable."""


@dataclass(frozen=True)
class FrankaRosConfig:
    """A Franka arm under franka_ros2, reached over the Bus."""

    robot_id: str = setting("franka", "unique robot name in the deployment")
    site: str = setting("local", "where the robot is (hardware registry)")
    model: str = setting("franka_fr3", "arm model announced to the registry", choices=("franka_fr3", "franka_panda"))
    arm_id: str = setting("fr3", "prefix of the joint names, <arm_id>_joint1..7 ('panda' for a Panda)")
    base_frame: str = setting("fr3_link0", "frame_id of the published targets (the robot base)")
    target_topic: str = setting(
        "/cartesian_impedance_controller/target_pose", "where the Cartesian impedance controller reads its target"
    )
    pose_topic: str = setting("/franka_robot_state_broadcaster/current_pose", "measured TCP pose (PoseStamped)")
    joint_states_topic: str = setting("/joint_states", "measured joint positions and velocities (JointState)")
    wrench_topic: str = setting(
        "/franka_robot_state_broadcaster/external_wrench_in_base_frame", "external wrench, base frame; '' = none"
    )
    gripper_joint_states_topic: str = setting("/franka_gripper/joint_states", "finger joints (JointState); '' = none")
    gripper_command_topic: str = setting("", "target width in m (Float64) for a gripper relay; '' = not commanded")
    gripper_max_width_m: float = setting(0.08, "opening of the fully open hand (m)", min=0.01, max=0.5)
    gripper_deadband: float = setting(0.05, "smallest gripper target change (0..1) that is published", min=0, max=1)
    control_rate_hz: float = setting(10.0, "rate at which step() is called (Hz)", min=1.0, max=1000.0)
    pace: bool = setting(
        True, "step() sleeps to keep control_rate_hz; false when a timer already calls it at that rate"
    )
    state_timeout_s: float = setting(0.5, "pose and joint states older than this are stale (s)", min=0.01, max=10.0)
    connect_timeout_s: float = setting(5.0, "how long connect() waits for franka_ros2's first state (s)", min=0.1)
    recovery_action: str = setting(
        "/action_server/error_recovery", "franka_ros2's error recovery action, named in errors for the operator"
    )
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")

    def __post_init__(self) -> None:
        for name in ("target_topic", "pose_topic", "joint_states_topic"):
            if not getattr(self, name):
                raise ConfigError(f"{name} is required")

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(f"{self.arm_id}_joint{i}" for i in range(1, 8))

    @property
    def recovery_command(self) -> str:
        """The command that runs franka_ros2's error recovery (an action, which the Bus cannot call)."""
        return f"ros2 action send_goal {self.recovery_action} {ERROR_RECOVERY} {{}}"
