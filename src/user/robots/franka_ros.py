"""`FrankaRosRobot`: a Franka under franka_ros2, driven over the Bus (rclpy, or Zenoh through zenoh-bridge-ros2dds).

A thin adapter: the shared `ArmRobot` (safety filter, hold, e-stop latch) decides every target; this class
publishes it as the equilibrium pose of a Cartesian impedance controller running in franka_ros2's
controller manager, and reads the state franka_ros2 publishes. `franka_msgs/msg/FrankaRobotState` is not in
our typestore (Humble's standard types only), so the state comes from its standard-typed siblings.

Topics (every one a setting; defaults are franka_ros2's names, remap where a site differs):

- `target_topic` (out) `/cartesian_impedance_controller/target_pose`, geometry_msgs/msg/PoseStamped: the
  target of crisp_controllers' `crisp_controllers/CartesianController` (utiasDSL/crisp_controllers,
  src/cartesian_controller.cpp: relative subscription `target_pose`, QoS(1); the pose is read in the
  controller's `base_frame` parameter, the header's frame is not looked at) loaded as
  `cartesian_impedance_controller`. franka_ros2 (1.x and 2.x) ships no controller that follows a pose topic;
  docs/franka_ros2.md says how to load this one (or remap to a site's own controller).
- `pose_topic` `/franka_robot_state_broadcaster/current_pose`, geometry_msgs/msg/PoseStamped: O_T_EE from
  `franka_robot_state_broadcaster` at 1 kHz, base frame. Kept as CDR bytes on arrival, decoded on read
  (`franka_ros_velocity`).
- `joint_states_topic` `/joint_states`, sensor_msgs/msg/JointState: franka_bringup's joint_state_publisher
  (30 Hz, arm and fingers), joints `<arm_id>_joint1..7`.
- `wrench_topic` `/franka_robot_state_broadcaster/external_wrench_in_base_frame`,
  geometry_msgs/msg/WrenchStamped: O_F_ext_hat_K at 1 kHz, kept as bytes like the pose; "" = none.
- `gripper_joint_states_topic` `/franka_gripper/joint_states`, sensor_msgs/msg/JointState: the gripper node
  (2.x; 1.x names it `<arm_id>_gripper`), two fingers of width / 2 each; "" = none.
- `gripper_command_topic` (out) "", std_msgs/msg/Float64: the target width in m. franka_gripper takes only
  actions (`move`, `grasp`, `gripper_action`), which the Bus does not carry: a relay node must turn this into
  a goal; "" = the gripper is not commanded.

State is read from the latest messages; a pose or joint state older than `state_timeout_s` (receive time) is
a `FrankaRosStateError`, which latches the e-stop. franka_ros2 stops its broadcasters after a reflex (its
hardware interface returns an error and the controller manager deactivates the controllers), and only its
error recovery action (`recovery_action`, franka_msgs/action/ErrorRecovery) clears the arm: the Bus carries
no actions, so the error names the `ros2 action send_goal` command for the operator, and `clear_estop()`
refuses (with the same text) until the state flows again. `reset()` does not move the arm: it holds where the
arm is. TCP velocity is the finite difference of the pose over the control period (franka_ros2 publishes
only the desired twist and no Jacobian).

Drive `step` from a thread that is not a callback of this node's bus, or set `pace: false` and call it from
the node's control timer: state arrives through the bus's callbacks, which cannot run while a callback of the
same bus sleeps. The settings and typed errors are `user.robots.franka_ros_config`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from user.bus.base import BEST_EFFORT, Handle
from user.interfaces.codec import DecodeError
from user.interfaces.stamps import from_time, header
from user.robots import embodiments
from user.robots.arm import ArmRobot
from user.robots.base import ArmState
from user.robots.franka_ros_config import (
    FLOAT64,
    JOINT_STATE,
    POSE_STAMPED,
    WRENCH_STAMPED,
    FrankaRosConfig,
    FrankaRosError,
    FrankaRosStateError,
    FrankaRosTimeoutError,
)
from user.robots.franka_ros_velocity import PoseWindow, RawSample, velocity
from user.robots.pacing import DeadlinePacer
from user.runtime.node import Node, TypedPublisher


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
        self._poses = PoseWindow(1.0 / cfg.control_rate_hz)  # 1 kHz poses, kept as bytes
        self._wrench: RawSample | None = None  # 1 kHz too: the latest, as bytes
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
        # sensor data: best effort matches reliable and best-effort publishers alike
        codec = node.codec
        self._handles.append(
            node.bus.create_subscription(cfg.pose_topic, codec.resolve(POSE_STAMPED), self._on_pose, BEST_EFFORT)
        )
        if cfg.wrench_topic:
            wrench_type = codec.resolve(WRENCH_STAMPED)
            self._handles.append(
                node.bus.create_subscription(cfg.wrench_topic, wrench_type, self._on_wrench, BEST_EFFORT)
            )
        for key, topic in (("joints", cfg.joint_states_topic), ("gripper", cfg.gripper_joint_states_topic)):
            if topic:
                self._handles.append(node.create_subscription(topic, JOINT_STATE, self._receiver(key), BEST_EFFORT))
        self._await_first_state()
        self._pacer.restart()

    def _close(self) -> None:
        for handle in [*self._handles, self._target_pub, self._gripper_pub]:
            if handle is not None:
                handle.close()
        self._handles, self._target_pub, self._gripper_pub = [], None, None
        with self._lock:
            self._latest.clear()
            self._wrench = None
        self._poses.clear()
        self._gripper_sent = None

    def clear_estop(self) -> None:
        """Release the e-stop once franka_ros2 publishes again; while its state is stale this raises
        `FrankaRosStateError` naming the error recovery command, and the e-stop stays latched."""
        if self.estopped and self.connected:
            self._read_state()  # raises while franka_ros2 is stopped
        super().clear_estop()

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
        ends = self._poses.ends()
        with self._lock:
            latest, raw_wrench = dict(self._latest), self._wrench
        if ends is not None:
            latest["pose"] = self._decoded(ends[1], POSE_STAMPED)
        pose, joints = (
            self._fresh(latest, "pose", cfg.pose_topic),
            self._fresh(latest, "joints", cfg.joint_states_topic),
        )
        tcp = pose_vector(pose.msg.pose)
        first = pose.msg if ends is None else self._decoded(ends[0], POSE_STAMPED).msg
        tcp_velocity = velocity(first, pose.msg, pose_vector, 0.5 * self._poses.window_s)
        positions, velocities = self._arm_joints(joints.msg)
        wrench = None if raw_wrench is None else self._decoded(raw_wrench, WRENCH_STAMPED).msg
        fingers = latest.get("gripper")
        return ArmState(
            stamp_ns=pose.stamp_ns,
            tcp_pose=tcp,
            tcp_velocity=tcp_velocity,
            joint_positions=positions,
            joint_velocities=velocities,
            gripper=self.gripper_target if fingers is None else self._opening(fingers.msg),
            wrench=None if wrench is None else wrench_vector(wrench.wrench),
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
                self._latest[key] = sample
                self._arrived.notify_all()

        return receive

    def _on_pose(self, payload: bytes) -> None:
        """1 kHz: store the bytes; decoding waits for a read (the control rate)."""
        self._poses.add(RawSample(self._clock(), payload))
        if "pose" not in self._latest:  # only the first one wakes connect()
            with self._arrived:
                self._latest["pose"] = self._decoded(RawSample(self._clock(), payload), POSE_STAMPED)
                self._arrived.notify_all()

    def _on_wrench(self, payload: bytes) -> None:
        sample = RawSample(self._clock(), payload)
        with self._lock:
            self._wrench = sample

    def _decoded(self, raw: RawSample, typename: str) -> _Sample:
        try:
            msg = self.node.codec.decode(raw.payload, self.node.codec.resolve(typename))
        except DecodeError as exc:
            raise FrankaRosStateError(f"franka_ros2 sent a malformed {typename} ({exc.reason})") from exc
        return _Sample(msg, raw.received, from_time(msg.header.stamp))

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
                "franka_ros2 stopped publishing or the link is down. After a reflex run "
                f"`{self.config.recovery_command}`, re-activate the controllers "
                "(`ros2 control list_controllers`), then clear the e-stop"
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
