"""FrankaRosRobot against a small franka_ros2 stand-in (franka_ros2 cannot run here), on both runtimes:
over Zenoh, and over real DDS with rclpy, on franka_ros2's own topic names (under a namespace per test) and
message types.

The stand-in is a test double on its own bus: it publishes what franka_ros2's broadcasters publish (TCP pose,
joint states in its own order, external wrench, finger joints) with their default QoS (reliable), records
every target pose it receives on the topic of crisp_controllers' Cartesian impedance controller, and moves
its "arm" halfway to the latest target every 10 ms.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from test.conftest import wait_until
from user.bus.base import BEST_EFFORT, Bus
from user.config import ConfigError, describe_settings, from_mapping
from user.interfaces.stamps import header
from user.robots import rotations as rot
from user.robots.franka_ros import FrankaRosRobot, pose_msg, pose_vector
from user.robots.franka_ros_config import (
    FLOAT64,
    JOINT_STATE,
    POSE_STAMPED,
    WRENCH_STAMPED,
    FrankaRosConfig,
    FrankaRosStateError,
    FrankaRosTimeoutError,
)
from user.robots.safety import SafetyConfig
from user.runtime.node import Node

MakeBus = Callable[..., Bus]
DEFAULTS = FrankaRosConfig()  # franka_ros2's topic names

START = np.concatenate([[0.45, 0.05, 0.30], rot.from_euler(math.pi, 0.0, 0.0)])
JOINTS = {f"fr3_joint{i}": 0.1 * i for i in range(1, 8)}  # distinct values prove the mapping by name
WRENCH = np.array([1.0, -2.0, 3.0, 0.1, -0.2, 0.3])
FINGER_M = 0.03  # each finger: the hand is 6 cm open = 0.75 of 8 cm
STEP_M = 0.02
RATE_HZ = 20.0
# crisp_controllers src/cartesian_controller.cpp (v1.0.0): the controller subscribes to the relative name
# "target_pose" (PoseStamped, QoS(1)), i.e. /<controller name>/target_pose; crisp_controllers_demos'
# config/fr3/controllers.yaml loads it as "cartesian_impedance_controller". Written out here, not taken from
# the driver's defaults: the stand-in follows upstream, the driver has to match it.
CRISP_TARGET_TOPIC = "/cartesian_impedance_controller/target_pose"
RECOVERY_COMMAND = "ros2 action send_goal /action_server/error_recovery franka_msgs/action/ErrorRecovery {}"
GUIDE = Path(__file__).resolve().parents[2] / "docs" / "franka_ros2.md"


class Franka2StandIn(Node):
    """franka_ros2 as seen from the Bus: broadcasters out, the Cartesian impedance controller's target in.

    franka_ros2's error recovery is an action (franka_hardware src/franka_action_server.cpp: node
    "action_server", action "~/error_recovery", franka_msgs/action/ErrorRecovery with an empty goal). The
    Bus carries no actions, so the stand-in serves none; `reflex()` and `recover()` play what the arm and
    that action do to the topics the driver reads."""

    def __init__(self, bus: Bus, prefix: str, *, pose_jitter_m: float = 0.0) -> None:
        super().__init__(bus)
        self.pose_jitter_m = pose_jitter_m  # measured O_T_EE noise: alternating +/- per published pose
        self.published = 0
        self.pose = START.copy()
        self.equilibrium: npt.NDArray[np.float64] | None = None
        self.targets: list[npt.NDArray[np.float64]] = []
        self.frames: list[str] = []
        self.widths: list[float] = []
        self.pose_pub = self.create_publisher(prefix + DEFAULTS.pose_topic, POSE_STAMPED)
        self.joint_pub = self.create_publisher(prefix + DEFAULTS.joint_states_topic, JOINT_STATE)
        self.wrench_pub = self.create_publisher(prefix + DEFAULTS.wrench_topic, WRENCH_STAMPED)
        self.finger_pub = self.create_publisher(prefix + DEFAULTS.gripper_joint_states_topic, JOINT_STATE, BEST_EFFORT)
        self.create_subscription(prefix + CRISP_TARGET_TOPIC, POSE_STAMPED, self.on_target)
        self.create_subscription(f"{prefix}/gripper/width", FLOAT64, lambda m: self.widths.append(float(m.data)))
        self.stopped = False
        self.timer = self.create_timer(0.01, self.tick)

    def reflex(self) -> None:
        """A reflex under franka_ros2 (humble branch franka_hardware src/franka_hardware_interface.cpp read():
        libfranka's ControlException is logged, the robot stopped and read() returns ERROR; the controller
        manager then deactivates the controllers on that hardware, so the broadcasters fall silent)."""
        self.stopped = True

    def recover(self) -> None:
        """The operator ran the error recovery action and re-activated the controllers: state flows again."""
        self.stopped = False

    def on_target(self, msg: Any) -> None:
        self.equilibrium = pose_vector(msg.pose)
        self.targets.append(self.equilibrium)
        self.frames.append(str(msg.header.frame_id))

    def tick(self) -> None:
        if self.stopped:
            return
        if self.equilibrium is not None:
            self.pose[:3] += 0.5 * (self.equilibrium[:3] - self.pose[:3])
            self.pose[3:] = self.equilibrium[3:]
        codec, stamp = self.codec, header(time.time_ns(), "fr3_link0", self.codec)
        measured = self.pose.copy()
        measured[0] += self.pose_jitter_m * (-1) ** self.published
        self.published += 1
        self.pose_pub.publish(codec.msg_class(POSE_STAMPED)(header=stamp, pose=pose_msg(measured, codec)))
        names = [*reversed(JOINTS), "fr3_finger_joint1"]  # not in 1..7 order, and with an extra joint
        positions = np.array([JOINTS.get(n, FINGER_M) for n in names])
        joint_state = codec.msg_class(JOINT_STATE)
        self.joint_pub.publish(
            joint_state(header=stamp, name=names, position=positions, velocity=-positions, effort=np.zeros(len(names)))
        )
        self.finger_pub.publish(
            joint_state(
                header=stamp,
                name=["fr3_finger_joint1", "fr3_finger_joint2"],
                position=np.full(2, FINGER_M),
                velocity=np.zeros(2),
                effort=np.zeros(2),
            )
        )
        vec3 = codec.msg_class("geometry_msgs/msg/Vector3")
        wrench = codec.msg_class("geometry_msgs/msg/Wrench")(force=vec3(*WRENCH[:3]), torque=vec3(*WRENCH[3:]))
        self.wrench_pub.publish(codec.msg_class(WRENCH_STAMPED)(header=stamp, wrench=wrench))


def ros_config(prefix: str, **overrides: Any) -> FrankaRosConfig:
    values: dict[str, Any] = {
        "target_topic": prefix + DEFAULTS.target_topic,  # the default must be where the controller listens
        "pose_topic": prefix + DEFAULTS.pose_topic,
        "joint_states_topic": prefix + DEFAULTS.joint_states_topic,
        "wrench_topic": prefix + DEFAULTS.wrench_topic,
        "gripper_joint_states_topic": prefix + DEFAULTS.gripper_joint_states_topic,
        "control_rate_hz": RATE_HZ,
        "state_timeout_s": 0.3,
        "connect_timeout_s": 5.0,
        "safety": SafetyConfig(max_translation_per_step_m=STEP_M),
    }
    values.update(overrides)
    return FrankaRosConfig(**values)


@pytest.fixture
def make_bus(make_any_bus: MakeBus) -> MakeBus:
    """Buses of both runtimes (Zenoh, and rclpy over DDS)."""
    return make_any_bus


@pytest.fixture
def standin(make_bus: MakeBus, topic: str) -> Franka2StandIn:
    return Franka2StandIn(make_bus("franka_ros2_standin"), topic)


@pytest.fixture
def robot(make_bus: MakeBus, topic: str, standin: Franka2StandIn) -> Iterator[FrankaRosRobot]:
    arm = FrankaRosRobot(Node(make_bus("franka_robot")), ros_config(topic))
    arm.connect()
    yield arm
    arm.close()


def act(dx: float = 0.0, gripper: float = 1.0) -> np.ndarray:
    a = np.zeros(7, np.float32)
    a[0], a[6] = dx, gripper
    return a


def received(standin: Franka2StandIn, target: npt.NDArray[np.float64] | None) -> Callable[[], bool]:
    assert target is not None
    return lambda: bool(standin.targets) and np.allclose(standin.targets[-1], target, atol=1e-12)


def test_reads_franka_ros2_state_by_name(robot: FrankaRosRobot, standin: Franka2StandIn) -> None:
    # connect() waits for the pose and joints only; the wrench and gripper topics are optional extras
    assert wait_until(lambda: robot.state().wrench is not None and robot.state().gripper > 0, 5.0)
    state = robot.reset()
    np.testing.assert_allclose(state.tcp_pose, START, atol=1e-12)
    np.testing.assert_allclose(state.joint_positions, [JOINTS[n] for n in robot.config.joint_names])
    np.testing.assert_allclose(state.joint_velocities, [-JOINTS[n] for n in robot.config.joint_names])
    assert state.wrench is not None
    np.testing.assert_allclose(state.wrench, WRENCH)
    assert state.gripper == pytest.approx(2 * FINGER_M / 0.08)
    np.testing.assert_allclose(state.tcp_velocity, np.zeros(6), atol=1e-9)  # the stand-in's arm is at rest
    assert wait_until(received(standin, START), 5.0)  # reset holds where the arm is
    assert standin.frames[-1] == "fr3_link0"


def test_steps_publish_targets_and_the_state_follows(robot: FrankaRosRobot, standin: Franka2StandIn) -> None:
    robot.reset()
    speeds = []
    for _ in range(5):
        result = robot.step(act(1.0))
        assert not result.held and not result.clipped
        speeds.append(result.state.tcp_velocity[0])
    target = robot.target_pose
    assert target is not None
    np.testing.assert_allclose(target[:3], START[:3] + np.array([5 * STEP_M, 0.0, 0.0]), atol=1e-12)
    assert wait_until(received(standin, target), 5.0)
    assert max(speeds) > 0.05  # finite difference of the moving pose (the arm covers 2 cm per 50 ms step)
    assert wait_until(lambda: bool(np.linalg.norm(robot.state().tcp_pose[:3] - target[:3]) < 1e-4), 5.0)


def test_bad_actions_publish_nothing_but_the_hold_target(robot: FrankaRosRobot, standin: Franka2StandIn) -> None:
    robot.reset()
    robot.step(act(1.0))
    robot.step(act(-0.5))
    hold = robot.target_pose
    assert hold is not None
    assert wait_until(received(standin, hold), 15.0)  # DDS under a loaded CI machine
    before = len(standin.targets)
    for bad in (act(float("nan")), act(0.0, float("inf")), np.zeros(3, np.float32)):
        for _ in range(3):
            result = robot.step(bad)
            assert result.held and "action rejected" in result.reasons[0]
    assert wait_until(lambda: len(standin.targets) >= before + 9, 5.0)  # one hold re-send per period
    assert all(np.array_equal(t, hold) for t in standin.targets[before:])
    np.testing.assert_array_equal(robot.target_pose, hold)


def test_gripper_targets_are_published_as_widths_on_change(make_bus: MakeBus, topic: str) -> None:
    standin = Franka2StandIn(make_bus("franka_ros2_standin"), topic)
    arm = FrankaRosRobot(
        Node(make_bus("franka_robot")), ros_config(topic, gripper_command_topic=f"{topic}/gripper/width")
    )
    arm.connect()
    try:
        arm.reset()
        for opening in (-1.0, -1.0, -1.0, 1.0):
            arm.step(act(0.0, opening))
        assert wait_until(lambda: len(standin.widths) == 2, 5.0)
        time.sleep(0.2)
        assert standin.widths == [0.0, pytest.approx(0.08)]  # closed once, opened once; repeats not re-sent
    finally:
        arm.close()


def test_stale_state_latches_the_estop(robot: FrankaRosRobot, standin: Franka2StandIn) -> None:
    robot.reset()
    standin.timer.close()  # franka_ros2 stops publishing
    time.sleep(0.4)
    with pytest.raises(FrankaRosStateError, match="s old"):
        robot.step(act(1.0))
    assert robot.estopped


def test_connect_without_franka_ros2_times_out_with_the_topics_named(make_bus: MakeBus, topic: str) -> None:
    arm = FrankaRosRobot(Node(make_bus("franka_robot")), ros_config(topic, connect_timeout_s=0.5))
    began = time.monotonic()
    named = f"{topic}{DEFAULTS.pose_topic}, {topic}{DEFAULTS.joint_states_topic}"
    with pytest.raises(FrankaRosTimeoutError, match=named):
        arm.connect()
    assert time.monotonic() - began < 2.0
    assert not arm.connected


def test_a_wrong_arm_id_is_reported(make_bus: MakeBus, topic: str, standin: Franka2StandIn) -> None:
    arm = FrankaRosRobot(Node(make_bus("franka_robot")), ros_config(topic, arm_id="panda"))
    arm.connect()
    try:
        with pytest.raises(FrankaRosStateError, match="has no panda_joint1.*check arm_id"):
            arm.reset()
    finally:
        arm.close()


def test_config_is_strict_and_every_setting_is_described() -> None:
    cfg = from_mapping(FrankaRosConfig, {"arm_id": "panda", "target_topic": "/x/equilibrium_pose"}, where="a.yaml")
    assert cfg.joint_names[0] == "panda_joint1" and cfg.target_topic == "/x/equilibrium_pose"
    with pytest.raises(ConfigError, match="unknown key 'equilibrium_topic'"):
        from_mapping(FrankaRosConfig, {"equilibrium_topic": "/x"}, where="a.yaml")
    with pytest.raises(ConfigError, match="pose_topic is required"):
        from_mapping(FrankaRosConfig, {"pose_topic": ""}, where="a.yaml")
    assert all(doc for _, _, _, doc in describe_settings(FrankaRosConfig))


# ---- issue 33 --------------------------------------------------------------------------------------------


def test_default_targets_reach_the_cartesian_impedance_controller(
    robot: FrankaRosRobot, standin: Franka2StandIn
) -> None:
    """No upstream controller listens on /equilibrium_pose; crisp_controllers' CartesianController does on
    /cartesian_impedance_controller/target_pose, and the default target topic is that one."""
    assert DEFAULTS.target_topic == CRISP_TARGET_TOPIC
    robot.reset()
    robot.step(act(1.0))
    assert wait_until(received(standin, robot.target_pose), 5.0)


def test_a_franka_ros2_stop_names_the_error_recovery_action(robot: FrankaRosRobot, standin: Franka2StandIn) -> None:
    robot.reset()
    standin.reflex()
    with pytest.raises(FrankaRosStateError) as stopped:
        assert wait_until(lambda: robot.step(act(1.0)).held, 5.0)
    assert RECOVERY_COMMAND in str(stopped.value)
    assert robot.estopped
    with pytest.raises(FrankaRosStateError, match=re.escape(RECOVERY_COMMAND)):
        robot.clear_estop()  # still stopped: clearing tells the operator again what recovers the arm
    standin.recover()
    assert wait_until(lambda: publishing(robot), 5.0)
    robot.clear_estop()
    assert not robot.estopped
    robot.reset()


def publishing(robot: FrankaRosRobot) -> bool:
    try:
        robot.state()
    except FrankaRosStateError:
        return False
    return True


def test_tcp_velocity_is_not_a_difference_of_two_noisy_poses(make_bus: MakeBus, topic: str) -> None:
    """A resting arm whose measured pose jitters by +/-0.5 mm: differencing consecutive poses reads
    0.1 m/s and more; over the control period it stays near zero."""
    Franka2StandIn(make_bus("franka_ros2_standin"), topic, pose_jitter_m=0.0005)
    arm = FrankaRosRobot(Node(make_bus("franka_robot")), ros_config(topic))
    arm.connect()
    try:
        arm.reset()
        speeds = [float(np.linalg.norm(arm.step(act()).state.tcp_velocity[:3])) for _ in range(20)]
    finally:
        arm.close()
    assert max(speeds) < 0.04, speeds


def test_the_guide_launches_franka_ros2_with_the_arguments_each_release_requires() -> None:
    """franka_bringup launch/franka.launch.py declares arm_id without a default in 1.x and 2.0-2.1 and
    robot_type (default '') from 2.2; load_gripper defaults to false from 2.0."""
    text = GUIDE.read_text()
    launches = re.findall(r"^ros2 launch franka_bringup franka\.launch\.py.*$", text, flags=re.MULTILINE)
    assert launches, "the guide gives no franka_bringup launch line"
    for line in launches:
        assert "arm_id:=fr3" in line or "robot_type:=fr3" in line, line
    assert any("robot_type:=fr3" in line and "load_gripper:=true" in line for line in launches)
    assert any("arm_id:=fr3" in line and "load_gripper" not in line for line in launches)
    assert RECOVERY_COMMAND in text
