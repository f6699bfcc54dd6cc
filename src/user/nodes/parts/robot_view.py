"""`RobotView`: what a robot node publishes for people to watch it (rviz, Foxglove), beside what learning uses.

Per robot, under its namespace (`/<robot_id>` by default):
- `robot_description` (std_msgs/String, latched): the arm's URDF (`user.sim.urdf`), link names as TF frames
  prefixed `<robot_id>/`;
- `joint_states` (sensor_msgs/JointState): the URDF's joint names (the FR3's `fr3_joint1..7`, then the fingers);
- `/tf` (tf2_msgs/TFMessage): `world` -> `<robot_id>/<root link>` -> ... -> `<robot_id>/tcp`, every link from the
  joint positions (`user.sim.kinematics`), and each simulated scene camera's optical frame;
- `<camera>/image/compressed` and `<camera>/camera_info` (sensor_msgs/CameraInfo: a pinhole from the simulated
  camera's field of view), stamped and framed alike;
- `markers` (visualization_msgs/MarkerArray): the workspace box, the task's points (the hole, the peg tip, ...)
  and its success region, and a text line with the episode, step, reward and whether a human is intervening;
- `clock_topic` (rosgraph_msgs/Clock), when set: the simulation time, so rviz and the other nodes run on it
  (`use_sim_time`).

Every stamp is the robot's clock: simulation time for a simulated arm (the stamp of its state), the wall clock for
a real one. A robot without an arm model (a gym env) gets joint states named `joint1..n` and nothing else.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from user.bus.base import BEST_EFFORT, LATCHED, RELIABLE
from user.interfaces.stamps import header, to_time
from user.robot_loop.camera_rig import CameraRig
from user.robot_loop.control_loop import TickResult
from user.robot_loop.gate import ActionGate
from user.robots.base import ArmState
from user.runtime.diagnostics import ERROR, OK, WARN, Status
from user.runtime.node import Node, TypedPublisher

if TYPE_CHECKING:  # user.cameras imports OpenCV: loaded only when a real driver has cameras
    from user.cameras.latest import CameraHealth

_log = logging.getLogger(__name__)

WORLD_FRAME = "world"
DESCRIPTION_PERIOD_S = 5.0  # the description is latched; re-sent now and then for bridges that drop latching
CAMERA_STALE_S = 2.0  # a camera whose images stopped this long ago is reported dead (ERROR)
STEP_STALE_S = 5.0  # a robot that has not stepped for this long is reported waiting (WARN)


class RobotView:
    """Publishes one robot's description, joint states, TF, camera images and info, markers and clock."""

    def __init__(
        self,
        node: Node,
        ns: str,
        robot: Any,
        cameras: tuple[str, ...],
        clock_topic: str,
        *,
        gate: ActionGate,
        rig: CameraRig | None = None,
        world_position: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ) -> None:
        self.node, self.robot, self.codec = node, robot, node.codec
        self.gate = gate  # what the robot was sent: its interventions counted in the diagnostics
        self.rig = rig  # a real driver's cameras: their health (frames, drops, errors, dead) in the diagnostics
        self.world_position = np.asarray(world_position, dtype=np.float64)
        self._started = time.monotonic()
        self._first_step: float | None = None  # monotonic time of the first published step
        self._last_step: float | None = None  # monotonic time of the last published step
        self._last_held = False
        self._steps = self._held_steps = 0
        self._camera_seen: dict[str, float] = {}  # camera -> monotonic time its image last changed (a new frame)
        self._camera_stamp: dict[str, int] = {}  # camera -> the stamp of its last image
        self._camera_images: dict[str, int] = dict.fromkeys(cameras, 0)
        self._pinholes: dict[str, Any] = {}  # camera -> ((width, height), K) of a simulated camera, or None
        self._urdf = ""  # the robot_description, made once
        self.prefix = f"{robot.descriptor.robot_id}/"
        self.sim = _sim_of(robot)
        self.arm = self.sim.arm if self.sim is not None else _real_arm_model(robot)
        self.kinematics = _kinematics(self.arm)
        self._joints = node.create_publisher(f"{ns}/joint_states", "sensor_msgs/msg/JointState", BEST_EFFORT)
        self._images = {
            cam: node.create_publisher(f"{ns}/{cam}/image/compressed", "sensor_msgs/msg/CompressedImage", BEST_EFFORT)
            for cam in cameras
        }
        self._infos = {
            cam: node.create_publisher(f"{ns}/{cam}/camera_info", "sensor_msgs/msg/CameraInfo", RELIABLE)
            for cam in cameras
        }
        self._clock = node.create_publisher(clock_topic, "rosgraph_msgs/msg/Clock", RELIABLE) if clock_topic else None
        self._tf: TypedPublisher | None = None
        self._markers: TypedPublisher | None = None
        self._description: TypedPublisher | None = None
        if self.kinematics is not None:
            try:
                self._visual_publishers(ns)
            except ImportError as exc:  # a ROS install without tf2_msgs or visualization_msgs: the robot still runs
                _log.warning("no /tf, markers or robot_description from %s: %s", self.prefix[:-1], exc)
                self._tf = self._markers = self._description = None

    def _visual_publishers(self, ns: str) -> None:
        from user.nodes.parts.robot_markers import MarkerBuilder

        assert self.kinematics is not None
        node = self.node
        self._tf = node.create_publisher("/tf", "tf2_msgs/msg/TFMessage", RELIABLE)
        self._markers = node.create_publisher(f"{ns}/markers", "visualization_msgs/msg/MarkerArray", RELIABLE)
        self.marker_builder = MarkerBuilder(self.codec, self.prefix + self.kinematics.root, self.robot, self.sim)
        self._description = node.create_publisher(f"{ns}/robot_description", "std_msgs/msg/String", LATCHED)
        self._publish_description()
        node.create_timer(DESCRIPTION_PERIOD_S, self._publish_description)

    def clock_ns(self) -> int:
        """The robot's clock: simulation time for a simulated arm, else the wall clock."""
        if self.sim is not None:
            return int(self.sim.stamp_ns)
        import time

        return time.time_ns()

    def publish(self, result: TickResult) -> None:
        """Everything for one control period (called on the control thread after the step)."""
        now = time.monotonic()
        self._last_step, self._last_held = now, result.held
        if self._first_step is None:
            self._first_step = now
        self._steps += 1
        self._held_steps += int(result.held)
        state = self.robot.state()
        stamp = int(state.stamp_ns) if isinstance(state, ArmState) else self.clock_ns()
        if self._clock is not None:
            self._clock.publish(self.codec.msg_class("rosgraph_msgs/msg/Clock")(clock=to_time(stamp, self.codec)))
        self._publish_joints(state, stamp)
        if self._tf is not None and isinstance(state, ArmState):
            self._publish_tf(state, stamp)
        for img in result.observation.images:
            pub = self._images.get(img.camera)
            if pub is None:
                continue
            if self._camera_stamp.get(img.camera) != img.stamp_ns:  # a camera that died leaves its last frame
                self._camera_seen[img.camera], self._camera_stamp[img.camera] = now, img.stamp_ns
                self._camera_images[img.camera] += 1
            frame = self._camera_frame(img.camera)
            pub.publish(
                self.codec.msg_class("sensor_msgs/msg/CompressedImage")(
                    header=header(img.stamp_ns, frame, self.codec),
                    format=img.format,
                    data=np.frombuffer(img.data, dtype=np.uint8),
                )
            )
            info = self._camera_info(img.camera, img.stamp_ns, frame)
            if info is not None:
                self._infos[img.camera].publish(info)
        if self._markers is not None:
            self._markers.publish(self.marker_builder.markers(result, stamp))

    def diagnostics(self) -> list[Status]:
        """The arm (e-stop, holding, stepping, interventions received) and each camera (images arriving or not; a
        real camera's own health too), for `/diagnostics`."""
        rid, now = self.robot.descriptor.robot_id, time.monotonic()
        values = {
            "steps": self._steps,
            "held_steps": self._held_steps,
            "interventions_received": self.gate.interventions_received,
        }
        if getattr(self.robot, "estopped", False):
            arm = Status(f"{rid}: robot", ERROR, f"e-stop latched: {self.robot.estop_reason}", values, rid)
        elif self._last_step is None or now - self._last_step > STEP_STALE_S:
            since = now - (self._last_step if self._last_step is not None else self._started)
            arm = Status(
                f"{rid}: robot", WARN, f"not stepping for {since:.0f} s (waiting for actions or a reset)", values, rid
            )
        elif self._last_held:
            arm = Status(f"{rid}: robot", WARN, "holding (no fresh action, or a safety limit)", values, rid)
        else:
            arm = Status(f"{rid}: robot", OK, "stepping", values, rid)
        health = self.rig.health() if self.rig is not None else {}
        return [arm, *(self._camera_status(rid, cam, now, health.get(cam)) for cam in self._camera_images)]

    def _camera_status(self, rid: str, camera: str, now: float, health: CameraHealth | None) -> Status:
        name, values = f"{rid}: camera {camera}", {"images": self._camera_images[camera], **_health_values(health)}
        if health is not None and health.dead:
            return Status(name, ERROR, f"dead: {health.dead_reason}", values, camera)
        seen = self._camera_seen.get(camera)
        if seen is None:
            if self._first_step is None or now - self._first_step <= CAMERA_STALE_S:
                return Status(name, OK, "waiting for the first image", values, camera)
            return Status(name, ERROR, f"no image in {now - self._first_step:.1f} s of stepping: dead?", values, camera)
        if now - seen > CAMERA_STALE_S and self._last_step is not None and self._last_step > seen:
            return Status(
                name, ERROR, f"no new frame for {now - seen:.1f} s while the robot steps: dead?", values, camera
            )
        return Status(name, OK, "alive", values, camera)

    def _publish_description(self) -> None:
        from user.sim.urdf import arm_urdf

        assert self.arm is not None and self._description is not None
        if not self._urdf:
            self._urdf = arm_urdf(self.arm)
        self._description.publish(self.codec.msg_class("std_msgs/msg/String")(data=self._urdf))

    def _publish_joints(self, state: Any, stamp: int) -> None:
        q = np.asarray(state.joint_positions, dtype=np.float64)
        v = np.asarray(state.joint_velocities, dtype=np.float64)
        if self.kinematics is not None and q.size == len(self.kinematics.arm.joints):
            fingers = self.kinematics.finger_positions(float(state.gripper))
            names = list(self.kinematics.joint_names)
            q, v = np.concatenate([q, fingers]), np.concatenate([v, np.zeros(fingers.size)])
        else:
            names = [f"joint{i + 1}" for i in range(q.size)]
        self._joints.publish(
            self.codec.msg_class("sensor_msgs/msg/JointState")(
                header=header(stamp, self.prefix + (self.kinematics.root if self.kinematics else "base"), self.codec),
                name=names,
                position=q,
                velocity=v,
                effort=np.zeros(0, np.float64),
            )
        )

    def _publish_tf(self, state: ArmState, stamp: int) -> None:
        assert self.kinematics is not None and self._tf is not None
        p = self.prefix
        root = p + self.kinematics.root
        transforms = [self._transform(stamp, WORLD_FRAME, root, self.world_position, np.array([0.0, 0.0, 0.0, 1.0]))]
        for link in self.kinematics.transforms(state.joint_positions, float(state.gripper)):
            transforms.append(self._transform(stamp, p + link.parent, p + link.child, link.translation, link.rotation))
        if self.sim is not None:
            from user.nodes.parts.robot_markers import scene_camera_poses

            for cam, (pos, quat) in scene_camera_poses(self.sim, tuple(self._images)).items():
                transforms.append(self._transform(stamp, root, self._camera_frame(cam), pos, quat))
        self._tf.publish(self.codec.msg_class("tf2_msgs/msg/TFMessage")(transforms=transforms))

    def _transform(self, stamp: int, parent: str, child: str, pos: Any, quat_xyzw: Any) -> Any:
        c = self.codec
        return c.msg_class("geometry_msgs/msg/TransformStamped")(
            header=header(stamp, parent, c),
            child_frame_id=child,
            transform=c.msg_class("geometry_msgs/msg/Transform")(
                translation=c.msg_class("geometry_msgs/msg/Vector3")(*(float(x) for x in pos)),
                rotation=c.msg_class("geometry_msgs/msg/Quaternion")(*(float(x) for x in quat_xyzw)),
            ),
        )

    def _camera_frame(self, camera: str) -> str:
        if self.arm is not None and camera == "wrist":
            from user.sim.urdf import WRIST_OPTICAL_LINK

            return self.prefix + WRIST_OPTICAL_LINK
        return f"{self.prefix}{camera}_camera_optical"

    def _camera_info(self, camera: str, stamp: int, frame: str) -> Any:
        if self.sim is None:
            return None  # a real camera's intrinsics come from its own driver (realsense2_camera publishes them)
        from user.nodes.parts.robot_markers import pinhole

        if camera not in self._pinholes:  # the camera model does not change: computed once per camera
            self._pinholes[camera] = pinhole(self.sim, self.robot.config.cameras, camera)
        found = self._pinholes[camera]
        if found is None:
            return None
        (width, height), k = found
        p = np.zeros(12)
        p[[0, 2, 5, 6, 10]] = k[0], k[2], k[4], k[5], 1.0
        return self.codec.msg_class("sensor_msgs/msg/CameraInfo")(
            header=header(stamp, frame, self.codec),
            height=height,
            width=width,
            distortion_model="plumb_bob",
            d=np.zeros(5),
            k=k,
            r=np.eye(3).ravel(),
            p=p,
            binning_x=0,
            binning_y=0,
            roi=self.codec.msg_class("sensor_msgs/msg/RegionOfInterest")(
                x_offset=0, y_offset=0, height=0, width=0, do_rectify=False
            ),
        )


def _health_values(health: CameraHealth | None) -> dict[str, Any]:
    """A real camera's counters (`Camera.health`), for the diagnostics' values; none for a simulated camera."""
    if health is None:
        return {}
    return {
        "frames": health.frames,
        "dropped": health.dropped,
        "overwritten": health.overwritten,
        "errors": health.errors,
        "last_error": health.last_error,
        "rate_hz": health.measured_rate_hz,
        "age_s": "" if health.age_s is None else health.age_s,
    }


def _sim_of(robot: Any) -> Any:
    """The physics layer of a simulated arm (an `ArmSim`), else None."""
    try:
        from user.sim.robot import SimFrankaRobot
    except ImportError:  # no MuJoCo here: not a simulated arm
        return None
    return robot.sim if isinstance(robot, SimFrankaRobot) else None


def _real_arm_model(robot: Any) -> Any:
    """The sim model of a real arm's type (its kinematics and URDF), or None (no arm, or the sim extra missing)."""
    from user.robots.embodiments import ARX, FRANKA

    embodiment = getattr(robot.descriptor, "embodiment_id", 0)
    if embodiment not in (FRANKA, ARX):
        return None
    try:
        if embodiment == FRANKA:
            from user.sim.franka_model import fr3_model

            return fr3_model()
        from user.sim.arx_model import arx_model

        return arx_model()
    except Exception as exc:  # the sim extra (MuJoCo, the model packages) is optional on a robot PC
        _log.warning(
            "no robot_description or TF for %s: its model is not available (%s)", robot.descriptor.robot_id, exc
        )
        return None


def _kinematics(arm: Any) -> Any:
    if arm is None:
        return None
    from user.sim.kinematics import ArmKinematics

    return ArmKinematics(arm)
