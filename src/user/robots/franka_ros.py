"""`FrankaRosRobot`: a Franka under franka_ros2, driven over the Bus (rclpy, or Zenoh through zenoh-bridge-ros2dds).

A thin adapter: the shared `ArmRobot` (safety filter, hold, e-stop latch) decides every target; this class
publishes it as the equilibrium pose of a Cartesian impedance controller running in franka_ros2's
controller manager, and reads the state franka_ros2 publishes. `franka_msgs/msg/FrankaRobotState` is not in
our typestore (Humble's standard types only), so the state comes from its standard-typed siblings.

Topics (every one a setting; defaults are franka_ros2's names, remap where a site differs):

- `target_topic` (out) `/equilibrium_pose`, geometry_msgs/msg/PoseStamped in `base_frame`: the equilibrium
  pose of a topic-driven Cartesian impedance controller, the convention of franka_ros's
  `cartesian_impedance_example_controller` (relative subscription `equilibrium_pose`, depth 20, so
  `/equilibrium_pose` for a controller in the root namespace). franka_ros2 for Humble ships no such
  controller in its examples: the site deploys one (or remaps this to its own controller's topic).
- `pose_topic` `/franka_robot_state_broadcaster/current_pose`, geometry_msgs/msg/PoseStamped: O_T_EE from
  `franka_robot_state_broadcaster`, base frame.
- `joint_states_topic` `/joint_states`, sensor_msgs/msg/JointState: `joint_state_broadcaster`, joints
  `<arm_id>_joint1..7` (the state broadcaster's `~/measured_joint_states` carries the same).
- `wrench_topic` `/franka_robot_state_broadcaster/external_wrench_in_base_frame`,
  geometry_msgs/msg/WrenchStamped: O_F_ext_hat_K (older releases name it
  `.../external_wrench_in_stiffness_frame_expressed_in_base_frame`); "" = none.
- `gripper_joint_states_topic` `/franka_gripper/joint_states`, sensor_msgs/msg/JointState: the
  `franka_gripper` node, two fingers of width / 2 each; "" = none.
- `gripper_command_topic` (out) "", std_msgs/msg/Float64: the target width in m. franka_gripper takes only
  actions (`move`, `grasp`, `gripper_action`), which the Bus does not carry: a relay node must turn this into
  a goal; "" = the gripper is not commanded.

State is read from the latest messages; a pose or joint state older than `state_timeout_s` (receive time) is
a `FrankaRosStateError`, which latches the e-stop. `reset()` does not move the arm: it holds where the arm
is (position it with franka_ros2's `move_to_start_example_controller`). TCP velocity is the finite
difference of the last two poses (franka_ros2 publishes only the desired twist).

Drive `step` from a thread that is not a callback of this node's bus, or set `pace: false` and call it from
the node's control timer: state arrives through the bus's callbacks, which cannot run while a callback of the
same bus sleeps.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from user.bus.base import BEST_EFFORT, Handle
from user.config import ConfigError, setting
from user.interfaces.stamps import from_time, header
from user.robots import embodiments, rotations
from user.robots.arm import ArmRobot
from user.robots.base import ArmState, RobotError
from user.robots.pacing import DeadlinePacer
from user.robots.safety import SafetyConfig
from user.runtime.node import Node, TypedPublisher

POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64 = "std_msgs/msg/Float64"
_NS = 1e-9


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
    target_topic: str = setting("/equilibrium_pose", "where the impedance controller reads its equilibrium pose")
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
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")

    def __post_init__(self) -> None:
        for name in ("target_topic", "pose_topic", "joint_states_topic"):
            if not getattr(self, name):
                raise ConfigError(f"{name} is required")

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(f"{self.arm_id}_joint{i}" for i in range(1, 8))


@dataclass(frozen=True)
class _Sample:
    """One received message with its receive time (monotonic s) and header stamp (ns)."""

    msg: Any
    received: float
    stamp_ns: int


class FrankaRosRobot(ArmRobot):
    """A Franka under franka_ros2 behind the shared `ArmRobot`."""

    def __init__(
        self, node: Node, config: FrankaRosConfig | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        cfg = config or FrankaRosConfig()
        descriptor = embodiments.franka_descriptor(cfg.robot_id, cfg.model, cfg.control_rate_hz, cfg.site)
        super().__init__(descriptor, cfg.safety)
        self.config = cfg
        self.node = node
        self._clock = clock
        self._pacer = DeadlinePacer(1.0 / cfg.control_rate_hz)
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified on every received message
        self._latest: dict[str, _Sample] = {}
        self._previous_pose: _Sample | None = None
        self._handles: list[Handle] = []
        self._target_pub: TypedPublisher | None = None
        self._gripper_pub: TypedPublisher | None = None
        self._gripper_sent: float | None = None

    # ---- driver hooks -------------------------------------------------------------------------------

    def _connect(self) -> None:
        cfg, node = self.config, self.node
        self._target_pub = node.create_publisher(cfg.target_topic, POSE_STAMPED)
        if cfg.gripper_command_topic:
            self._gripper_pub = node.create_publisher(cfg.gripper_command_topic, FLOAT64)
        inputs = {
            "pose": (cfg.pose_topic, POSE_STAMPED),
            "joints": (cfg.joint_states_topic, JOINT_STATE),
            "wrench": (cfg.wrench_topic, WRENCH_STAMPED),
            "gripper": (cfg.gripper_joint_states_topic, JOINT_STATE),
        }
        for key, (topic, typename) in inputs.items():
            if topic:  # sensor data: best effort matches reliable and best-effort publishers alike
                self._handles.append(node.create_subscription(topic, typename, self._receiver(key), BEST_EFFORT))
        self._await_first_state()
        self._pacer.restart()

    def _close(self) -> None:
        for handle in [*self._handles, self._target_pub, self._gripper_pub]:
            if handle is not None:
                handle.close()
        self._handles, self._target_pub, self._gripper_pub = [], None, None
        with self._lock:
            self._latest.clear()
            self._previous_pose = None
        self._gripper_sent = None

    def _reset(self, seed: int | None) -> ArmState:
        if seed is not None:
            self._log.debug("reset(seed=%d): franka_ros2 arms start where they are; the seed is not used", seed)
        state = self._read_state()
        self._publish_target(np.asarray(state.tcp_pose, dtype=np.float64))  # the controller holds here
        self._gripper_sent = None
        self._pacer.restart()
        return state

    def _read_state(self) -> ArmState:
        cfg = self.config
        with self._lock:
            latest, previous = dict(self._latest), self._previous_pose
        pose, joints = (
            self._fresh(latest, "pose", cfg.pose_topic),
            self._fresh(latest, "joints", cfg.joint_states_topic),
        )
        tcp = pose_vector(pose.msg.pose)
        positions, velocities = self._arm_joints(joints.msg)
        wrench = latest.get("wrench")
        fingers = latest.get("gripper")
        return ArmState(
            stamp_ns=pose.stamp_ns,
            tcp_pose=tcp,
            tcp_velocity=finite_difference(previous, pose),
            joint_positions=positions,
            joint_velocities=velocities,
            gripper=self.gripper_target if fingers is None else self._opening(fingers.msg),
            wrench=None if wrench is None else wrench_vector(wrench.msg.wrench),
        )

    def _command(self, target_pose: npt.NDArray[np.float64], gripper: float) -> None:
        self._publish_target(target_pose)
        changed = self._gripper_sent is None or abs(gripper - self._gripper_sent) >= self.config.gripper_deadband
        if self._gripper_pub is not None and changed:
            width = gripper * self.config.gripper_max_width_m
            self._gripper_pub.publish(self.node.codec.msg_class(FLOAT64)(data=float(width)))
            self._gripper_sent = gripper

    def _wait_period(self) -> None:
        if self.config.pace:
            self._pacer.wait()

    # ---- internals ----------------------------------------------------------------------------------

    def _receiver(self, key: str) -> Callable[[Any], None]:
        def receive(msg: Any) -> None:
            sample = _Sample(msg, self._clock(), from_time(msg.header.stamp))
            with self._arrived:
                if key == "pose":
                    self._previous_pose = self._latest.get("pose")
                self._latest[key] = sample
                self._arrived.notify_all()

        return receive

    def _await_first_state(self) -> None:
        cfg = self.config
        needed = {"pose": cfg.pose_topic, "joints": cfg.joint_states_topic}
        with self._arrived:
            self._arrived.wait_for(lambda: needed.keys() <= self._latest.keys(), timeout=cfg.connect_timeout_s)
            missing = [topic for key, topic in needed.items() if key not in self._latest]
        if missing:
            self._close()
            raise FrankaRosTimeoutError(
                f"robot {self.descriptor.robot_id!r}: nothing received on {', '.join(missing)} within "
                f"{cfg.connect_timeout_s:.1f} s. Is franka_ros2 running (franka_robot_state_broadcaster, "
                "joint_state_broadcaster) and are the topics remapped to these names?"
            )

    def _fresh(self, latest: dict[str, _Sample], key: str, topic: str) -> _Sample:
        sample = latest.get(key)
        if sample is None:
            raise FrankaRosStateError(f"no message on {topic} yet")
        age = self._clock() - sample.received
        if age > self.config.state_timeout_s:
            raise FrankaRosStateError(
                f"the last message on {topic} is {age:.2f} s old (limit {self.config.state_timeout_s:.2f} s): "
                "franka_ros2 stopped publishing or the link is down"
            )
        return sample

    def _arm_joints(self, msg: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        names = list(msg.name)
        wanted = self.config.joint_names
        missing = [n for n in wanted if n not in names]
        if missing:
            raise FrankaRosStateError(
                f"{self.config.joint_states_topic} has no {', '.join(missing)} (got {names}); check arm_id"
            )
        index = [names.index(n) for n in wanted]
        positions = np.asarray(msg.position, dtype=np.float64)
        velocities = np.asarray(msg.velocity, dtype=np.float64)
        dq = velocities[index] if velocities.size == len(names) else np.zeros(7)
        return positions[index], dq

    def _opening(self, msg: Any) -> float:
        width = float(np.sum(np.asarray(msg.position, dtype=np.float64)))  # two fingers, each width / 2
        return min(max(width / self.config.gripper_max_width_m, 0.0), 1.0)

    def _publish_target(self, pose: npt.NDArray[np.float64]) -> None:
        if self._target_pub is None:
            raise FrankaRosError(f"robot {self.descriptor.robot_id!r} has no target publisher; connect() first")
        codec = self.node.codec
        self._target_pub.publish(
            codec.msg_class(POSE_STAMPED)(
                header=header(time.time_ns(), self.config.base_frame, codec), pose=pose_msg(pose, codec)
            )
        )


def pose_vector(pose: Any) -> npt.NDArray[np.float64]:
    """(7,) xyz + xyzw of a geometry_msgs/msg/Pose; raises `FrankaRosStateError` for a non-finite one."""
    p, q = pose.position, pose.orientation
    vec = np.array([p.x, p.y, p.z, q.x, q.y, q.z, q.w], dtype=np.float64)
    if not np.all(np.isfinite(vec)) or np.linalg.norm(vec[3:]) < 1e-9:
        raise FrankaRosStateError(f"franka_ros2 published an invalid TCP pose {vec.tolist()}")
    return vec


def pose_msg(pose: npt.NDArray[np.float64], codec: Any) -> Any:
    """geometry_msgs/msg/Pose of a (7,) xyz + xyzw vector."""
    point = codec.msg_class("geometry_msgs/msg/Point")(x=float(pose[0]), y=float(pose[1]), z=float(pose[2]))
    x, y, z, w = (float(v) for v in pose[3:])
    return codec.msg_class("geometry_msgs/msg/Pose")(
        position=point, orientation=codec.msg_class("geometry_msgs/msg/Quaternion")(x=x, y=y, z=z, w=w)
    )


def wrench_vector(wrench: Any) -> npt.NDArray[np.float64]:
    """(6,) force xyz + torque xyz of a geometry_msgs/msg/Wrench."""
    f, t = wrench.force, wrench.torque
    return np.array([f.x, f.y, f.z, t.x, t.y, t.z], dtype=np.float64)


def finite_difference(previous: _Sample | None, current: _Sample) -> npt.NDArray[np.float64]:
    """(6,) linear + angular TCP velocity between two pose messages (by their stamps); zeros when unknown."""
    if previous is None:
        return np.zeros(6)
    dt = (current.stamp_ns - previous.stamp_ns) * _NS
    if not (0.0 < dt < 1.0) or not math.isfinite(dt):
        return np.zeros(6)
    a, b = pose_vector(previous.msg.pose), pose_vector(current.msg.pose)
    angular = rotations.to_rotvec(
        rotations.multiply(rotations.normalize(b[3:]), rotations.conjugate(rotations.normalize(a[3:])))
    )
    return np.concatenate([(b[:3] - a[:3]) / dt, angular / dt])
