"""`ArxSdkRobot`: clean failure without SocketCAN, tool-frame conversions, and a step through a stand-in SDK."""

from __future__ import annotations

import types
from typing import Any

import mujoco
import numpy as np
import pytest

from test.sim.poses import pose_at
from user.robots import rotations
from user.robots.arx_sdk import ArxConnectionError, ArxSdkConfig, ArxSdkRobot, eef_to_tool, tool_to_eef
from user.sim.arx_model import HOME, arx_model
from user.tasks.base import TOOL_DOWN


def test_the_sdk_imports_without_hardware() -> None:
    sdk = pytest.importorskip("arx5_interface")
    assert hasattr(sdk, "Arx5CartesianController") and hasattr(sdk, "EEFState")


def test_connecting_without_the_can_interface_names_it() -> None:
    robot = ArxSdkRobot(ArxSdkConfig(interface="can_missing0"))
    with pytest.raises(ArxConnectionError, match="can_missing0"):
        robot.connect()
    assert not robot.connected


def test_an_sdk_failure_on_an_existing_interface_is_an_arx_connection_error() -> None:
    pytest.importorskip("arx5_interface")
    robot = ArxSdkRobot(ArxSdkConfig(interface="lo"))  # exists, but is no CAN bus: the SDK itself refuses
    with pytest.raises(ArxConnectionError, match="'lo'"):
        robot.connect()


@pytest.mark.parametrize("rpy", [(0.0, 0.0, 0.0), (0.3, -0.5, 1.2), (np.pi, 0.2, -0.4)])
def test_tool_and_eef_poses_round_trip(rpy: tuple[float, float, float]) -> None:
    pose_6d = np.array([0.3, -0.1, 0.2, *rpy])
    back = eef_to_tool(tool_to_eef(eef_to_tool(pose_6d)))
    first = eef_to_tool(pose_6d)
    assert back[:3] == pytest.approx(first[:3])
    assert rotations.angle_between(back[3:], first[3:]) < 1e-9


def test_the_sdk_tool_frame_matches_the_simulated_arx() -> None:
    """eef_link (= link6 orientation) at HOME as roll/pitch/yaw, converted, is the sim's tcp orientation."""
    model = arx_model("L5").build().compile()
    data = mujoco.MjData(model)
    data.qpos[:6] = HOME
    mujoco.mj_kinematics(model, data)
    r = data.xmat[int(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "link6"))].reshape(3, 3)
    rpy = [np.arctan2(r[2, 1], r[2, 2]), -np.arcsin(r[2, 0]), np.arctan2(r[1, 0], r[0, 0])]
    tool = eef_to_tool(np.array([0.0, 0.0, 0.0, *rpy]))
    _, sim_wxyz = pose_at(model, np.array(HOME))
    assert rotations.angle_between(tool[3:], np.array([*sim_wxyz[1:], sim_wxyz[0]])) < 1e-6
    assert rotations.angle_between(tool[3:], TOOL_DOWN) < 1e-3


class _FakeController:
    """Stands in for `Arx5CartesianController`: holds the last command as its state."""

    def __init__(self, model: str, interface: str) -> None:
        self.model, self.interface = model, interface
        self.pose = np.array([0.3, 0.0, 0.12, 0.0, 0.0, 0.0])
        self.gripper = 0.0
        self.time = 0.0
        self.commands: list[Any] = []
        self.damped = False

    def get_robot_config(self) -> Any:
        return types.SimpleNamespace(gripper_width=0.088)

    def get_eef_state(self) -> Any:
        return types.SimpleNamespace(pose_6d=self.pose.copy, gripper_pos=self.gripper)

    def get_joint_state(self) -> Any:
        return types.SimpleNamespace(pos=lambda: np.zeros(6), vel=lambda: np.zeros(6))

    def get_timestamp(self) -> float:
        self.time += 0.1
        return self.time

    def reset_to_home(self) -> None:
        self.pose = np.array([0.3, 0.0, 0.12, np.pi, 0.0, 0.0])  # arbitrary start

    def set_eef_cmd(self, cmd: Any) -> None:
        self.commands.append(cmd)
        self.pose, self.gripper = np.asarray(cmd.pose), cmd.width

    def set_to_damping(self) -> None:
        self.damped = True


def test_steps_send_cartesian_targets_through_the_sdk() -> None:
    made: list[_FakeController] = []

    def controller(model: str, interface: str) -> _FakeController:
        made.append(_FakeController(model, interface))
        return made[-1]

    fake_sdk = types.SimpleNamespace(
        Arx5CartesianController=controller,
        EEFState=lambda pose, width: types.SimpleNamespace(pose=pose, width=width, timestamp=0.0),
    )
    robot = ArxSdkRobot(ArxSdkConfig(interface="lo", control_rate_hz=100.0), sdk_loader=lambda: fake_sdk)
    robot.connect()
    start = robot.reset()
    result = robot.step(np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32))
    sent = made[0].commands[-1]
    assert sent.pose[:3] == pytest.approx(start.tcp_pose[:3] + np.array([0.02, 0.0, 0.0]))
    assert sent.width == pytest.approx(0.088) and sent.timestamp > 0.0
    assert result.state.tcp_pose[:3] == pytest.approx(sent.pose[:3])
    assert robot.step(np.full(7, np.nan, dtype=np.float32)).held
    robot.close()
    assert made[0].damped
