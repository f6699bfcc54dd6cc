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
        self.data = np.full((6, 8, 3), number, dtype=np.uint8)

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
    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def supports(self, option: str) -> bool:
        return option == "global_time_enabled"

    def set_option(self, option: str, value: float) -> None:
        self.calls["options"][option] = value


class _Profile:
    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def get_device(self) -> Any:
        return types.SimpleNamespace(first_color_sensor=lambda: _Sensor(self.calls))

    def get_stream(self, stream: str) -> Any:
        video = types.SimpleNamespace(width=lambda: 8, height=lambda: 6)
        return types.SimpleNamespace(as_video_stream_profile=lambda: video)


class _Config:
    def __init__(self, calls: dict[str, Any]) -> None:
        self.calls = calls

    def enable_device(self, serial: str) -> None:
        self.calls["device"] = serial

    def enable_stream(self, *args: Any) -> None:
        self.calls["stream"] = args


class _Pipeline:
    def __init__(self, calls: dict[str, Any], queue: list[_ColourFrame]) -> None:
        self.calls = calls
        self.queue = queue

    def start(self, cfg: _Config) -> _Profile:
        return _Profile(self.calls)

    def try_wait_for_frames(self, timeout_ms: int) -> tuple[bool, Any]:
        if not self.queue:
            self.calls["stopped"].wait(timeout_ms / 1000)
            return False, None
        return True, _Frameset(self.queue.pop(0))

    def stop(self) -> None:
        self.calls["stopped"].set()


def fake_sdk(serials: list[str], frames: list[_ColourFrame]) -> tuple[types.ModuleType, dict[str, Any]]:
    """A module with the pyrealsense2 calls the driver makes; `calls` records what it was asked."""
    calls: dict[str, Any] = {"options": {}, "stopped": threading.Event()}
    queue = list(frames)  # shared by every pipeline of the module
    rs = types.ModuleType("pyrealsense2")
    rs.camera_info = types.SimpleNamespace(serial_number="serial_number")  # type: ignore[attr-defined]
    rs.context = lambda: types.SimpleNamespace(query_devices=lambda: [_Device(s) for s in serials])  # type: ignore[attr-defined]
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
    assert calls["options"] == {"global_time_enabled": 1}
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
