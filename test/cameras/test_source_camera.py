"""`SourceCamera` (what the simulator plugs into) with real capture threads: the Camera contract."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from test.cameras.sources import (
    CountingSource,
    FakeClock,
    FlakySource,
    SleepySource,
    SlowOpenSource,
    config,
    solid,
)
from test.conftest import wait_until
from user.cameras import (
    Camera,
    CameraDeadError,
    CameraNotOpenError,
    CameraOpenError,
    FrameSource,
    NoFrameError,
    OpenableSource,
    SourceCamera,
    StaleFrameError,
)


@pytest.fixture
def cameras() -> Iterator[list[Camera]]:
    """Cameras opened by a test; closed (with their deadline) at teardown."""
    opened: list[Camera] = []
    yield opened
    for camera in opened:
        camera.close()


def start(cameras: list[Camera], camera: Camera) -> Camera:
    camera.open()
    cameras.append(camera)
    return camera


def camera_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"camera-{name}"]


def test_sources_satisfy_the_protocols() -> None:
    assert isinstance(CountingSource(), FrameSource)
    assert not isinstance(CountingSource(), OpenableSource)
    assert isinstance(SlowOpenSource(), OpenableSource)


def test_latest_is_the_newest_frame(cameras: list[Camera]) -> None:
    source = CountingSource(limit=5)
    camera = start(cameras, SourceCamera(config(rate_hz=200.0), source, pace=False))
    assert wait_until(lambda: camera.health().frames == 5, 5.0)
    frame = camera.latest(max_age_s=5.0)
    assert (frame.seq, frame.hardware_stamp_ns, frame.stamp_ns, int(frame.rgb[0, 0, 0])) == (5, 5000, 5000, 5)
    assert frame.camera == "cam"


def test_latest_never_waits_for_a_stalled_source(cameras: list[Camera]) -> None:
    source = SleepySource(sleep_s=5.0)
    camera = start(cameras, SourceCamera(config(rate_hz=100.0), source, pace=False))
    assert source.sleeping.wait(5.0)  # the capture thread is now stuck inside grab()
    started = time.perf_counter()
    for _ in range(1000):
        frame = camera.poll(max_age_s=10.0)
    elapsed = time.perf_counter() - started
    assert frame is not None and frame.seq == 1
    assert elapsed < 0.5, f"1000 polls took {elapsed:.3f} s while the source slept"
    started = time.perf_counter()
    with pytest.raises(StaleFrameError):
        camera.latest(max_age_s=0.0)
    assert time.perf_counter() - started < 0.1
    source.wake()
    assert wait_until(lambda: camera.health().frames >= 2, 5.0)


def test_stale_and_dead_while_the_source_is_stuck_on_a_controlled_clock(cameras: list[Camera]) -> None:
    clock = FakeClock()
    source = SleepySource(sleep_s=5.0)
    camera = start(cameras, SourceCamera(config(rate_hz=10.0, dead_after_periods=5), source, pace=False, clock=clock))
    assert source.sleeping.wait(5.0)
    assert camera.latest(max_age_s=0.1).seq == 1
    clock.advance(0.2)
    with pytest.raises(StaleFrameError, match="200 ms old") as stale:
        camera.latest(max_age_s=0.1)
    assert not isinstance(stale.value, CameraDeadError)
    frame = camera.poll(max_age_s=0.1)
    assert frame is not None and frame.stale
    clock.advance(0.4)  # 0.6 s > 5 periods of 0.1 s without a frame
    with pytest.raises(CameraDeadError, match="'cam'.*device dead or disconnected"):
        camera.latest(max_age_s=0.1)
    assert camera.health().dead
    source.wake()


def test_a_dead_device_is_detected_and_reported_by_name(
    cameras: list[Camera], caplog: pytest.LogCaptureFixture
) -> None:
    source = CountingSource(limit=3)
    with caplog.at_level(logging.WARNING, logger="user.cameras"):
        camera = start(cameras, SourceCamera(config("front", rate_hz=50.0, dead_after_periods=5), source, pace=False))
        assert wait_until(lambda: source.produced == 3 and camera.health().dead, 5.0)  # 0.1 s without frames
        assert any(r.levelno == logging.ERROR and "'front'" in r.getMessage() for r in caplog.records)
        with pytest.raises(CameraDeadError, match="'front'"):
            camera.latest(max_age_s=0.05)
        source.limit = None  # the device comes back
        assert wait_until(lambda: not camera.health().dead, 5.0)
    assert any("'front': frames are arriving again" in r.getMessage() for r in caplog.records)


def test_no_frame_at_all_is_dead_too(cameras: list[Camera]) -> None:
    clock = FakeClock()
    cfg = config(rate_hz=50.0, dead_after_periods=5)
    camera = start(cameras, SourceCamera(cfg, CountingSource(limit=0), clock=clock))
    with pytest.raises(NoFrameError):
        camera.latest()
    clock.advance(0.11)  # 5.5 periods after the open
    with pytest.raises(CameraDeadError, match="no frame for 0.11 s"):
        camera.latest()
    assert camera.health().dead


def test_end_of_stream_stops_capture_and_marks_the_camera_dead(cameras: list[Camera]) -> None:
    camera = start(cameras, SourceCamera(config(), CountingSource(limit=2, end=True), pace=False))
    assert wait_until(lambda: camera.health().dead, 5.0)
    assert "test stream is over" in camera.health().dead_reason
    assert wait_until(lambda: not camera_threads("cam"), 5.0)  # the thread ended by itself
    assert camera.poll(max_age_s=10.0) is not None  # the last frame is still there


def test_capture_errors_are_counted_and_capture_goes_on(cameras: list[Camera]) -> None:
    source = FlakySource()
    camera = start(cameras, SourceCamera(config(rate_hz=100.0), source))
    assert wait_until(lambda: camera.health().errors >= 3 and camera.health().frames >= 3, 5.0)
    assert camera.health().last_error == "USB transfer failed"


def test_malformed_frames_are_counted_not_kept(cameras: list[Camera]) -> None:
    class BadSource:
        def grab(self, timeout_s: float) -> tuple[np.ndarray, int | None] | None:
            return np.zeros((4, 4), dtype=np.float32), None

    camera = start(cameras, SourceCamera(config(), BadSource()))
    assert wait_until(lambda: camera.health().errors >= 2, 5.0)
    assert "expected an HxWx3 uint8 RGB image, got float32 (4, 4)" in camera.health().last_error
    assert camera.poll() is None


def test_pacing_holds_the_rate(cameras: list[Camera]) -> None:
    source = CountingSource()
    camera = start(cameras, SourceCamera(config(rate_hz=20.0), source))  # paced by default
    time.sleep(0.5)  # let it run for a while: this measures a rate, it synchronises nothing
    camera.close()
    assert 5 <= source.produced <= 16, source.produced


def test_crop_and_resize(cameras: list[Camera]) -> None:
    class Gradient:
        def grab(self, timeout_s: float) -> tuple[np.ndarray, int | None] | None:
            image = np.zeros((48, 64, 3), dtype=np.uint8)
            image[:, 32:] = (200, 100, 50)  # right half coloured
            return image, 42

    cfg = config(crop=(32, 0, 32, 48), resize=(16, 24))
    camera = start(cameras, SourceCamera(cfg, Gradient()))
    assert wait_until(lambda: camera.poll() is not None, 5.0)
    frame = camera.latest(max_age_s=5.0)
    assert frame.rgb.shape == (24, 16, 3)
    assert np.abs(frame.rgb.astype(int) - (200, 100, 50)).max() <= 1
    assert frame.stamp_ns == 42  # the hardware stamp the source gave


def test_frames_are_private_copies(cameras: list[Camera]) -> None:
    shared = solid(7)

    class Reusing:
        def grab(self, timeout_s: float) -> tuple[np.ndarray, int | None] | None:
            return shared, None

    camera = start(cameras, SourceCamera(config(), Reusing()))
    assert wait_until(lambda: camera.poll() is not None, 5.0)
    frame = camera.latest(5.0)
    shared[:] = 0  # the source reuses its buffer
    assert int(frame.rgb[0, 0, 0]) == 7
    assert not frame.rgb.flags.writeable


def test_open_close_lifecycle_with_an_openable_source() -> None:
    source = SlowOpenSource(open_s=5.0)
    source.release.set()
    camera = SourceCamera(config("life"), source)
    with pytest.raises(CameraNotOpenError, match="'life'"):
        camera.latest()
    with camera:
        assert camera.is_open and source.opened.is_set()
        threads = camera_threads("life")
        assert len(threads) == 1 and threads[0].daemon
        camera.open()  # idempotent
        assert len(camera_threads("life")) == 1
    assert source.closed.is_set()
    assert not camera_threads("life")
    with pytest.raises(CameraNotOpenError):
        camera.poll()
    camera.close()  # idempotent


def test_open_is_bounded_by_its_timeout() -> None:
    source = SlowOpenSource(open_s=5.0)
    camera = SourceCamera(config("slow", open_timeout_s=0.2), source)
    started = time.monotonic()
    with pytest.raises(CameraOpenError, match="'slow'.*did not open within 0.2 s"):
        camera.open()
    assert time.monotonic() - started < 2.0
    assert not camera.is_open
    with pytest.raises(CameraOpenError, match="'slow': the previous capture thread is still stuck"):
        camera.open()
    source.release.set()  # the open finally returns: the left-behind thread releases the device and ends
    assert source.closed.wait(5.0)
    assert wait_until(lambda: not camera_threads("slow"), 5.0)
    camera.open()  # the device is free again
    assert camera.is_open
    camera.close()


def test_open_errors_are_raised_in_the_caller() -> None:
    class Broken:
        def open(self) -> None:
            raise OSError("no such device")

        def close(self) -> None:
            pass

        def grab(self, timeout_s: float) -> tuple[np.ndarray, int | None] | None:
            return None

    with pytest.raises(CameraOpenError, match="'broken': cannot open frame source Broken: no such device"):
        SourceCamera(config("broken"), Broken()).open()
    assert not camera_threads("broken")


def test_close_has_a_deadline_even_when_the_source_is_stuck(caplog: pytest.LogCaptureFixture) -> None:
    source = SleepySource(sleep_s=5.0)
    camera = SourceCamera(config("stuck", close_timeout_s=0.2), source, pace=False)
    camera.open()
    assert source.sleeping.wait(5.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="user.cameras"):
        camera.close()
    assert time.monotonic() - started < 1.0
    assert any("'stuck': capture thread did not stop within 0.2 s" in r.getMessage() for r in caplog.records)
    with pytest.raises(CameraOpenError, match="still stuck"):
        camera.open()
    source.wake()
    assert wait_until(lambda: not camera_threads("stuck"), 5.0)


def test_reopen_starts_from_scratch(cameras: list[Camera]) -> None:
    source = CountingSource(limit=3)
    camera = start(cameras, SourceCamera(config(), source, pace=False))
    assert wait_until(lambda: camera.health().frames == 3, 5.0)
    camera.close()
    source.limit = 4
    camera.open()
    assert wait_until(lambda: camera.health().frames == 1, 5.0)
    assert camera.latest(5.0).seq == 1
