"""`OpenCVCamera` on a video file written here with cv2.VideoWriter, and on local cameras through a stand-in of
OpenCV's V4L2 backend (this machine has no webcam)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from test.cameras.sources import config
from test.cameras.v4l2_standin import StandInCapture, V4L2Device
from test.conftest import wait_until
from user.cameras import CameraOpenError, OpenCVCamera

WIDTH, HEIGHT, FRAMES = 64, 48, 10


def colour(i: int) -> tuple[int, int, int]:
    """RGB colour of frame i."""
    return (20 * i + 30, 200 - 15 * i, 100)


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("video") / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 30.0, (WIDTH, HEIGHT))
    assert writer.isOpened(), "OpenCV cannot write MJPG video here"
    for i in range(FRAMES):
        rgb = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
        rgb[:] = colour(i)
        writer.write(np.ascontiguousarray(rgb[:, :, ::-1]))  # VideoWriter takes BGR
    writer.release()
    return path


def close_to(rgb: np.ndarray, expected: tuple[int, int, int]) -> bool:
    return bool(np.abs(rgb.reshape(-1, 3).mean(axis=0) - expected).max() < 6)


def test_plays_a_file_to_its_end(video: Path) -> None:
    camera = OpenCVCamera(config("file", driver="opencv", device=str(video), rate_hz=100.0, dead_after_periods=50))
    assert camera.describe_device() == f"video file {video}"
    with camera:
        assert wait_until(lambda: "reached its end" in camera.health().dead_reason, 5.0)
        health = camera.health()
        assert health.frames == FRAMES
        last = camera.poll(max_age_s=10.0)
        assert last is not None and last.seq == FRAMES
        assert last.rgb.shape == (HEIGHT, WIDTH, 3)
        assert close_to(last.rgb, colour(FRAMES - 1)), last.rgb.reshape(-1, 3).mean(axis=0)
        assert last.hardware_stamp_ns is None  # a file has no capture time


def test_first_frame_and_processing(video: Path) -> None:
    cfg = config("proc", driver="opencv", device=str(video), rate_hz=5.0, crop=(0, 0, 32, 24), resize=(16, 12))
    with OpenCVCamera(cfg) as camera:
        assert wait_until(lambda: camera.poll() is not None, 5.0)
        frame = camera.latest(max_age_s=5.0)
        assert frame.seq == 1 and frame.rgb.shape == (12, 16, 3)
        assert close_to(frame.rgb, colour(0)) and frame.camera == "proc"


def test_loop_restarts_the_file(video: Path) -> None:
    cfg = config("loop", driver="opencv", device=str(video), rate_hz=200.0, loop=True, dead_after_periods=400)
    with OpenCVCamera(cfg) as camera:
        assert wait_until(lambda: camera.health().frames > FRAMES + 2, 5.0)
        assert not camera.health().dead


def test_a_missing_file_fails_to_open_with_the_camera_name(tmp_path: Path) -> None:
    camera = OpenCVCamera(config("gone", driver="opencv", device=str(tmp_path / "missing.avi")))
    with pytest.raises(CameraOpenError, match="'gone': OpenCV cannot open video stream .*missing.avi"):
        camera.open()
    assert not camera.is_open


def test_a_missing_device_index_fails_to_open() -> None:
    camera = OpenCVCamera(config("usb", driver="opencv", device="57", open_timeout_s=5.0))
    assert camera.describe_device() == "video device 57"
    with pytest.raises(CameraOpenError, match="'usb'"):
        camera.open()


# ---------------------------------------------------------------------- local cameras, on the V4L2 stand-in


@pytest.fixture
def usb(monkeypatch: pytest.MonkeyPatch) -> V4L2Device:
    """/dev/video0 as OpenCV's V4L2 backend presents it (`test.cameras.v4l2_standin`)."""
    device = V4L2Device()
    monkeypatch.setattr(StandInCapture, "devices", {0: device})
    monkeypatch.setattr(StandInCapture, "refused", [])
    monkeypatch.setattr(cv2, "VideoCapture", StandInCapture)
    return device


def test_a_usb_camera_by_index_opens_on_v4l2_without_ffmpeg_parameters(usb: V4L2Device) -> None:
    """Issue 33 #8: V4L2 refuses the FFmpeg open/read timeouts, so a capture opened with them never opens."""
    with OpenCVCamera(config("usb", driver="opencv", device="0", open_timeout_s=2.0)) as camera:
        assert wait_until(lambda: camera.health().frames >= 3, 5.0), (camera.health(), StandInCapture.refused)
        assert camera.latest(max_age_s=1.0).rgb.shape == (12, 16, 3)
    assert StandInCapture.refused == [] and usb.opens == 1


def test_an_unplugged_usb_camera_is_reopened_when_it_is_back(usb: V4L2Device) -> None:
    """Issue 33 #9: after an unplug V4L2 reads fail for good on that capture; the camera opens a new one."""
    cfg = config("usb", driver="opencv", device="0", rate_hz=50.0)
    with OpenCVCamera(cfg) as camera:
        assert wait_until(lambda: camera.health().frames >= 3, 5.0)
        usb.unplug()
        assert wait_until(lambda: camera.health().dead, 5.0)
        usb.replug()
        seen = camera.health().frames
        assert wait_until(lambda: camera.health().frames > seen + 2 and not camera.health().dead, 10.0)
        assert camera.latest(max_age_s=1.0).seq > seen
    assert usb.opens >= 2


def test_a_usb_camera_that_stays_away_is_dead_for_good(usb: V4L2Device) -> None:
    cfg = config("usb", driver="opencv", device="0", rate_hz=50.0, reopen_timeout_s=1.0)
    with OpenCVCamera(cfg) as camera:
        assert wait_until(lambda: camera.health().frames >= 1, 5.0)
        usb.unplug()
        assert wait_until(lambda: "not back within 1 s" in camera.health().dead_reason, 10.0), camera.health()
        assert "OpenCV cannot open video device 0" in camera.health().dead_reason


def test_files_and_urls_go_to_ffmpeg_with_its_timeouts_and_local_cameras_to_v4l2() -> None:
    from user.cameras.opencv import capture_args

    source, backend, params = capture_args("rtsp://cam/stream", 2.0, 0.5)
    assert (source, backend) == ("rtsp://cam/stream", cv2.CAP_FFMPEG)
    assert params == [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 2000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 500]
    assert capture_args(" 2 ", 2.0, 0.5) == (2, cv2.CAP_V4L2, [])
    assert capture_args("/dev/v4l/by-id/usb-cam-video-index0", 2.0, 0.5)[1:] == (cv2.CAP_V4L2, [])
