"""`RealSenseCamera`: a clear error when pyrealsense2 is missing; the driver logic against a stand-in SDK.

pyrealsense2 and a RealSense are not available here, so the second part runs the driver on a small
in-test module with the same calls (the real SDK is exercised only on a robot site).
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from typing import Any

import numpy as np
import pytest

from test.cameras.sources import config
from test.conftest import wait_until
from user.cameras import CameraError, CameraOpenError, CameraUnavailableError, RealSenseCamera, build_camera


def test_missing_pyrealsense2_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyrealsense2", None)  # makes `import pyrealsense2` fail
    cfg = config("wrist", driver="realsense", serial="123")
    with pytest.raises(CameraUnavailableError) as info:
        RealSenseCamera(cfg)
    message = str(info.value)
    assert message.startswith("camera 'wrist': ")
    assert "pip install pyrealsense2" in message
    assert info.value.camera == "wrist"
    assert isinstance(info.value, CameraError)
    with pytest.raises(CameraUnavailableError, match="pyrealsense2"):
        build_camera(cfg)


class _Device:
    def __init__(self, serial: str) -> None:
        self.serial = serial

    def get_info(self, what: str) -> str:
        assert what == "serial_number"
        return self.serial


class _ColourFrame:
    def __init__(self, number: int, stamp_ms: float, domain: str) -> None:
        self.number, self.stamp_ms, self.domain = number, stamp_ms, domain
        self.data = np.full((6, 8, 3), number % 256, dtype=np.uint8)

    def __bool__(self) -> bool:
        return True

    def get_frame_number(self) -> int:
        return self.number

    def get_data(self) -> memoryview:
        return self.data.data  # the array's buffer, as a memoryview

    def get_timestamp(self) -> float:
        return self.stamp_ms

    def get_frame_timestamp_domain(self) -> str:
        return self.domain


class _Frameset:
    def __init__(self, colour: _ColourFrame) -> None:
        self.colour = colour

    def get_color_frame(self) -> _ColourFrame:
        return self.colour


class _Sensor:
    def __init__(self, calls: dict[str, Any], kind: str) -> None:
        self.calls, self.kind = calls, kind

    def supports(self, option: str) -> bool:
        return option == "global_time_enabled"

    def set_option(self, option: str, value: float) -> None:
        self.calls["options"][option] = (self.kind, value)


class _ProfileDevice:
    """`pipeline_profile.get_device()`; a D405 (`colour_sensor` False) has no RGB camera module."""

    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def first_color_sensor(self) -> _Sensor:
        if not self.calls["colour_sensor"]:  # librealsense include/librealsense2/hpp/rs_device.hpp device::first<T>
            raise RuntimeError("Could not find requested sensor type!")
        return _Sensor(self.calls, "colour")

    def first_depth_sensor(self) -> _Sensor:
        return _Sensor(self.calls, "depth")


class _Profile:
    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def get_device(self) -> _ProfileDevice:
        return _ProfileDevice(self.calls)


class _Config:
    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def enable_device(self, serial: str) -> None:
        self.calls["device"] = serial

    def enable_stream(self, *args: Any) -> None:
        self.calls["stream"] = args


class _Pipeline:
    """rs2::pipeline as librealsense src/pipeline/pipeline.cpp runs it: frames from `queue` (or, `live`, a new
    frame every 1/30 s while the device is plugged in); after an unplug a wait times out, tries one restart,
    and when the device is still away leaves the pipeline stopped, so later calls raise."""

    def __init__(self, calls: dict[str, Any], queue: list[_ColourFrame]) -> None:
        self.calls = calls
        self.queue = queue
        self.active = False
        self._serial = ""

    def _present(self) -> bool:
        connected = self.calls["connected"]
        return bool(connected) and (not self._serial or self._serial in connected)

    def start(self, cfg: _Config) -> _Profile:
        if self.active:
            raise RuntimeError("start() cannot be called before stop()")
        self._serial = self.calls.get("device", "")
        if not self._present():  # config.cpp resolve -> device_hub.cpp wait_for_device (5 s, 3 tries upstream)
            raise RuntimeError("No device connected")
        self.active = True
        self.calls["starts"] += 1
        return _Profile(self.calls)

    def stop(self) -> None:
        if not self.active:
            raise RuntimeError("stop() cannot be called before start()")
        self.active = False
        self.calls["stopped"].set()

    def _dequeue(self, timeout_ms: int) -> _Frameset | None:
        if self._present():
            if self.calls["live"]:
                self.calls["stopped"].wait(1 / 30)  # the device's frame period
                self.calls["number"] += 1
                return _Frameset(_ColourFrame(self.calls["number"], 0.0, "global"))
            if self.queue:
                return _Frameset(self.queue.pop(0))
        self.calls["stopped"].wait(timeout_ms / 1000)
        return None

    def _restart(self) -> bool:
        """pipeline.cpp: after a timeout with the device gone, unsafe_stop() then unsafe_start(); a failed start
        leaves no active profile."""
        self.active = False
        try:
            self.start(_Config(self.calls))
        except RuntimeError:
            return False
        return True

    def try_wait_for_frames(self, timeout_ms: int = 5000) -> tuple[bool, Any]:
        if not self.active:
            raise RuntimeError("try_wait_for_frames cannot be called before start()")
        frames = self._dequeue(timeout_ms)
        if frames is not None:
            return True, frames
        if not self._present():
            self._restart()  # failure: logged at INFO upstream, and False
        return False, None

    def wait_for_frames(self, timeout_ms: int = 5000) -> Any:
        if not self.active:
            raise RuntimeError("wait_for_frames cannot be called before start()")
        frames = self._dequeue(timeout_ms)
        if frames is not None:
            return frames
        if not self._present() and not self._restart():  # upstream appends the timeout without a space
            raise RuntimeError(f"Device disconnected. Failed to reconnect: No device connected{timeout_ms}")
        raise RuntimeError(f"Frame didn't arrive within {timeout_ms}")


def fake_sdk(
    serials: list[str], frames: list[_ColourFrame], *, colour_sensor: bool = True, live: bool = False
) -> tuple[types.ModuleType, dict[str, Any]]:
    """A module with the pyrealsense2 calls the driver makes; `calls` records what it was asked, and
    `calls["connected"]` (the serials plugged in) is what tests unplug and replug."""
    calls: dict[str, Any] = {
        "options": {},
        "stopped": threading.Event(),
        "connected": list(serials),
        "colour_sensor": colour_sensor,
        "live": live,
        "number": 0,
        "starts": 0,
    }
    queue = list(frames)  # shared by every pipeline of the module
    rs = types.ModuleType("pyrealsense2")
    rs.camera_info = types.SimpleNamespace(serial_number="serial_number")  # type: ignore[attr-defined]
    rs.context = lambda: types.SimpleNamespace(  # type: ignore[attr-defined]
        query_devices=lambda: [_Device(s) for s in calls["connected"]]
    )
    rs.config = functools.partial(_Config, calls)  # type: ignore[attr-defined]
    rs.pipeline = functools.partial(_Pipeline, calls, queue)  # type: ignore[attr-defined]
    rs.stream = types.SimpleNamespace(color="color")  # type: ignore[attr-defined]
    rs.format = types.SimpleNamespace(rgb8="rgb8")  # type: ignore[attr-defined]
    rs.option = types.SimpleNamespace(global_time_enabled="global_time_enabled")  # type: ignore[attr-defined]
    rs.timestamp_domain = types.SimpleNamespace(global_time="global", hardware_clock="hardware")  # type: ignore[attr-defined]
    return rs, calls


def test_colour_frames_with_hardware_stamps_and_drop_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = [_ColourFrame(1, 1000.5, "global"), _ColourFrame(2, 1033.8, "global"), _ColourFrame(5, 1133.8, "global")]
    rs, calls = fake_sdk(["111", "123"], frames)
    monkeypatch.setitem(sys.modules, "pyrealsense2", rs)
    cfg = config("wrist", driver="realsense", serial="123", width=8, height=6, rate_hz=30.0)
    with RealSenseCamera(cfg) as camera:
        assert wait_until(lambda: camera.health().frames == 3, 5.0)
        frame = camera.latest(max_age_s=5.0)
        health = camera.health()
    assert (frame.seq, int(frame.rgb[0, 0, 0]), frame.rgb.shape) == (3, 5, (6, 8, 3))
    assert frame.hardware_stamp_ns == 1_133_800_000
    assert health.dropped == 2  # device frames 3 and 4 never arrived
    assert calls["device"] == "123"
    assert calls["stream"] == ("color", 8, 6, "rgb8", 30)
    assert calls["options"] == {"global_time_enabled": ("colour", 1)}
    assert calls["stopped"].is_set()


def test_device_clock_stamps_are_not_used_as_capture_times(monkeypatch: pytest.MonkeyPatch) -> None:
    rs, _ = fake_sdk(["123"], [_ColourFrame(1, 55.0, "hardware")])
    monkeypatch.setitem(sys.modules, "pyrealsense2", rs)
    with RealSenseCamera(config("wrist", driver="realsense")) as camera:
        assert wait_until(lambda: camera.poll() is not None, 5.0)
        assert camera.latest(max_age_s=5.0).hardware_stamp_ns is None


def test_an_absent_serial_names_the_connected_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    rs, _ = fake_sdk(["111", "222"], [])
    monkeypatch.setitem(sys.modules, "pyrealsense2", rs)
    camera = RealSenseCamera(config("wrist", driver="realsense", serial="999"))
    with pytest.raises(
        CameraOpenError, match=r"'wrist': RealSense 999 is not connected \(RealSense devices: 111, 222\)"
    ):
        camera.open()


def test_a_d405_streams_colour_from_its_depth_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 #10: a D405 has no colour sensor; `first_color_sensor()` raises, and the camera must still open."""
    rs, calls = fake_sdk(["405"], [_ColourFrame(1, 1000.0, "global")], colour_sensor=False)
    monkeypatch.setitem(sys.modules, "pyrealsense2", rs)
    with RealSenseCamera(config("wrist", driver="realsense", serial="405")) as camera:
        assert wait_until(lambda: camera.poll() is not None, 5.0)
        assert camera.latest(max_age_s=5.0).hardware_stamp_ns == 1_000_000_000
    assert calls["options"] == {"global_time_enabled": ("depth", 1)}


def test_the_stand_in_fails_as_librealsense_does_after_an_unplug() -> None:
    rs, calls = fake_sdk(["123"], [])
    cfg = rs.config()
    cfg.enable_device("123")
    pipeline = rs.pipeline()
    pipeline.start(cfg)
    with pytest.raises(RuntimeError, match="^Frame didn't arrive within 10$"):
        pipeline.wait_for_frames(10)
    calls["connected"].clear()
    assert pipeline.try_wait_for_frames(10) == (False, None)
    with pytest.raises(RuntimeError, match=r"^try_wait_for_frames cannot be called before start\(\)$"):
        pipeline.try_wait_for_frames(10)
    with pytest.raises(RuntimeError, match="^No device connected$"):
        rs.pipeline().start(cfg)


def test_an_unplugged_realsense_is_reopened_when_it_is_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 #9: librealsense leaves the pipeline stopped after a failed reconnect; the camera reopens it."""
    rs, calls = fake_sdk(["123"], [], live=True)
    monkeypatch.setitem(sys.modules, "pyrealsense2", rs)
    cfg = config("wrist", driver="realsense", serial="123", rate_hz=30.0)
    with RealSenseCamera(cfg) as camera:
        assert wait_until(lambda: camera.health().frames >= 3, 5.0)
        calls["connected"].clear()
        assert wait_until(lambda: camera.health().dead, 5.0)
        calls["connected"].append("123")
        seen = camera.health().frames
        assert wait_until(lambda: camera.health().frames > seen + 2 and not camera.health().dead, 10.0)
    assert calls["starts"] >= 2
