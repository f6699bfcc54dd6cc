"""Simulated cameras: shapes, time stamps on the state clock, latest-frame semantics, both modes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from user.sim.cameras import SimCameraConfig
from user.sim.errors import RenderError, SimUnstableError
from user.sim.franka_sim import FrankaSim
from user.sim.robot import SimFrankaRobot, SimRobotConfig

WAIT_S = 10.0  # deadline for the render thread to catch up (a shared 2-core machine can be slow)


def test_inline_frames_have_the_right_shape_and_the_state_stamp(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("button_press", cameras=SimCameraConfig(mode="inline"))
    robot.reset(0)
    result = robot.step(np.zeros(7, dtype=np.float32))
    frames = robot.frames()
    assert set(frames) == {"wrist", "front"}
    for frame in frames.values():
        assert frame.image.shape == (128, 128, 3) and frame.image.dtype == np.uint8
        assert frame.stamp_ns == result.state.stamp_ns
        assert frame.image.std() > 5.0  # not a blank image
    assert not np.array_equal(frames["wrist"].image, frames["front"].image)


def test_threaded_frames_catch_up_and_stamps_increase(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("pick_place", cameras=SimCameraConfig(mode="thread", width=64, height=48))
    robot.reset(0)
    cameras = robot.cameras
    assert cameras is not None
    stamps = []
    for _ in range(3):
        state = robot.step(np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32)).state
        assert cameras.wait_for(cameras.last_seq, WAIT_S)
        frame = robot.frames()["front"]
        assert frame.image.shape == (48, 64, 3)
        assert frame.stamp_ns == state.stamp_ns
        stamps.append(frame.stamp_ns)
    assert stamps == sorted(stamps) and len(set(stamps)) == 3


def test_frames_show_the_arm_moving(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("pick_place", cameras=SimCameraConfig(mode="inline", names=("front",)))
    robot.reset(0)
    before = robot.frames()["front"].image
    for _ in range(5):
        robot.step(np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0], dtype=np.float32))
    assert np.abs(robot.frames()["front"].image.astype(int) - before).mean() > 0.5


def test_unknown_camera_is_a_render_error() -> None:
    robot = SimFrankaRobot(SimRobotConfig(task="", cameras=SimCameraConfig(names=("ceiling",))))
    with pytest.raises(RenderError, match="ceiling"):
        robot.connect()


def test_close_stops_the_render_thread(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("", cameras=SimCameraConfig(mode="thread"))
    cameras = robot.cameras
    assert cameras is not None
    robot.close()
    assert cameras._thread is None


def test_frame_source_hands_out_each_new_frame_once(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("", cameras=SimCameraConfig(mode="inline", names=("front",)))
    robot.reset(0)
    assert robot.cameras is not None
    source = robot.cameras.source("front")
    grabbed = source.grab(WAIT_S)
    assert grabbed is not None and grabbed[0].shape == (128, 128, 3)
    assert source.grab(0.01) is None  # nothing new yet
    state = robot.step(np.zeros(7, dtype=np.float32)).state
    again = source.grab(WAIT_S)
    assert again is not None and again[1] == state.stamp_ns
    with pytest.raises(RenderError, match="not rendered"):
        robot.cameras.source("wrist")


def test_mujoco_warnings_go_to_logging_not_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    sim = FrankaSim()
    sim.data.qvel[:] = 1e12
    with caplog.at_level("WARNING", logger="mujoco"), pytest.raises(SimUnstableError):
        sim.advance()
    assert any("unstable" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_frames_are_read_only(make_robot: Callable[..., SimFrankaRobot]) -> None:
    robot = make_robot("", cameras=SimCameraConfig(mode="inline", names=("front",)))
    robot.reset(0)
    with pytest.raises(ValueError):
        robot.frames()["front"].image[0, 0, 0] = 1
