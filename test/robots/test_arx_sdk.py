"""`ArxSdkRobot`: clean failure without SocketCAN (SLCAN: the slcand step), tool-frame conversions, steps through the
stand-in SDK in its own process, and the gripper readout of newer arms."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from test.conftest import wait_until
from test.robots.arx5_standin.robot import standin_robot
from test.sim.poses import pose_at
from user.config.strict import ConfigError
from user.robots import arx_sdk, rotations
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


def test_steps_send_cartesian_targets_through_the_sdk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    robot = standin_robot(monkeypatch, tmp_path)
    robot.connect()
    try:
        start = robot.reset()
        assert start.gripper == pytest.approx(1.0)  # reset_to_home opens the gripper
        result = robot.step(np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0], dtype=np.float32))
        assert not result.held and result.applied[0] == pytest.approx(1.0)
        goal = start.tcp_pose[:3] + np.array([0.02, 0.0, 0.0])
        # the stand-in arm takes each target at its next 2 ms control cycle
        assert wait_until(lambda: np.allclose(robot.state().tcp_pose[:3], goal) and robot.state().gripper == 0.0, 5.0)
        assert robot.step(np.full(7, np.nan, dtype=np.float32)).held
    finally:
        robot.close()
    assert robot.sdk_pid is None and not robot.connected


def test_a_missing_interface_with_an_slcan_adapter_says_to_run_slcand(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "ttyACM0").touch()  # arx5-sdk README: an SLCAN adapter appears as /dev/ttyACM*, no can* interface
    monkeypatch.setattr(arx_sdk, "DEV", tmp_path)
    robot = ArxSdkRobot(ArxSdkConfig(interface="can_missing0"))
    with pytest.raises(ArxConnectionError) as caught:
        robot.connect()
    assert f"sudo slcand -o -f -s8 {tmp_path}/ttyACM0 can_missing0 && sudo ifconfig can_missing0 up" in str(
        caught.value
    )


def test_newer_arms_connect_with_their_gripper_readout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    robot = standin_robot(monkeypatch, tmp_path, arm="arm_gripper_readout=-3.4", gripper_open_readout=-3.4)
    robot.connect()
    try:
        assert robot.reset().gripper == pytest.approx(1.0)
    finally:
        robot.close()


@pytest.mark.parametrize("readout", [0.0, float("nan")])
def test_a_gripper_readout_of_zero_is_refused(readout: float) -> None:
    with pytest.raises(ConfigError, match="gripper_open_readout"):
        ArxSdkConfig(gripper_open_readout=readout)
