"""The ARX SDK in its own process: a killed process, a constructor that never returns, the SDK's emergency state
(limp, or stuck) and an IK failure each end in a held robot (e-stop latched) and one line, within the deadline.

The SDK is the stand-in `arx5_interface` (test/robots/arx5_standin), which follows arx5-sdk's
controller_base.cpp and cartesian_controller.cpp, failures included.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from test.robots.arx5_standin.robot import standin_robot
from user.robots.arx_sdk import ArxConnectionError, ArxEmergencyError, ArxIkError, ArxSdkError, ArxSdkRobot
from user.robots.safety import SafetyConfig

RIGHT = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32)
STILL = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the project logged at warning and above (the SDK's own lines are info)."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("user")]


def _connected(robot: ArxSdkRobot) -> ArxSdkRobot:
    robot.connect()
    robot.reset()
    return robot


def test_a_killed_sdk_process_holds_the_robot_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    robot = _connected(standin_robot(monkeypatch, tmp_path))
    try:
        assert not robot.step(RIGHT).held
        pid = robot.sdk_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        caplog.clear()
        began = time.monotonic()
        with pytest.raises(ArxSdkError, match=f"pid {pid}.*killed by SIGKILL") as caught:
            robot.step(STILL)
        assert time.monotonic() - began < robot.config.call_timeout_s + 3.0
        assert robot.estopped and "\n" not in str(caught.value)
        assert len(problems := _problems(caplog)) == 1 and "E-STOP" in problems[0] and "SIGKILL" in problems[0]
    finally:
        robot.close()
    assert not robot.connected


def test_a_constructor_that_never_returns_fails_connect_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A newer arm (gripper motor mounted the other way) without `gripper_open_readout`: the SDK's sanity check
    enters its endless emergency state inside the constructor, ignoring Ctrl-C."""
    robot = standin_robot(monkeypatch, tmp_path, arm="arm_gripper_readout=-3.4", connect_timeout_s=2.0)
    began = time.monotonic()
    with pytest.raises(ArxConnectionError) as caught:
        robot.connect()
    assert time.monotonic() - began < 2.0 + 6.0  # the deadline, plus starting and ending the process
    message = str(caught.value)
    assert "did not answer within 2 s" in message and "Gripper position error" in message
    assert "hardware.gripper_open_readout" in message and "\n" not in message
    assert not robot.connected and robot.sdk_pid is None
    assert _problems(caplog) == []  # the node reports the error once; the driver adds nothing


def test_the_sdk_process_is_ended_when_its_constructor_never_returns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    robot = standin_robot(monkeypatch, tmp_path, arm="arm_gripper_readout=-3.4", connect_timeout_s=1.0)
    pids: list[int] = []
    original = robot._sdk_process.call

    def spy(*args: object, **kwargs: object) -> object:
        pids.append(robot._sdk_process.pid or 0)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(robot._sdk_process, "call", spy)
    with pytest.raises(ArxConnectionError):
        robot.connect()
    assert pids and not _alive(pids[0])


def test_an_emergency_mid_episode_holds_and_records_no_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Over current in the SDK's background thread: kp drops to 0, the arm is limp, commands are ignored."""
    robot = _connected(standin_robot(monkeypatch, tmp_path, arm="overcurrent_after=2,emergency=limp"))
    try:
        caplog.clear()
        results = []
        with pytest.raises(ArxEmergencyError, match="limp"):
            for _ in range(500):  # the SDK's thread trips within a cycle or two (2 ms each) of the second command
                results.append(robot.step(RIGHT))
        assert robot.estopped and all(not r.held for r in results)
        assert len(problems := _problems(caplog)) == 1 and "position gain to 0" in problems[0]
        with pytest.raises(ArxEmergencyError):
            robot.step(RIGHT)  # still limp: no step is ever returned to be recorded
    finally:
        robot.close()


def test_an_sdk_stuck_in_its_emergency_holds_within_the_call_deadline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As written upstream the emergency loop re-locks its own command mutex: every later call never returns."""
    robot = _connected(standin_robot(monkeypatch, tmp_path, arm="overcurrent_after=1,emergency=deadlock"))
    try:
        caplog.clear()
        began = time.monotonic()
        with pytest.raises(ArxSdkError, match="did not answer within 0.5 s") as caught:
            for _ in range(500):  # the SDK's thread takes the lock for good within a cycle or two (2 ms each)
                robot.step(STILL)
        assert time.monotonic() - began < 5.0
        assert "Emergency state entered" in str(caught.value) and robot.estopped and robot.sdk_pid is None
        assert len(_problems(caplog)) == 1
    finally:
        robot.close()


def test_an_unreachable_target_is_a_typed_error_and_not_sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    safety = SafetyConfig(max_translation_per_step_m=0.25)  # one step from x 0.3 to 0.55: beyond the arm's reach
    robot = _connected(standin_robot(monkeypatch, tmp_path, safety=safety))
    try:
        before = robot.state().tcp_pose
        with pytest.raises(ArxIkError, match="E_MAX_ITERATIONS_EXCEEDED"):
            robot.step(RIGHT)
        assert robot.estopped
        assert robot.state().tcp_pose == pytest.approx(before)  # nothing was sent
    finally:
        robot.close()
