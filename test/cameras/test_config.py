"""`CameraConfig` through the strict loader, and `build_camera`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from test.cameras.sources import CountingSource
from user.bus.zenoh_bus import ZenohBus
from user.cameras import (
    BusCamera,
    CameraConfig,
    CameraUnavailableError,
    OpenCVCamera,
    SourceCamera,
    build_camera,
)
from user.config import ConfigError, describe_settings, from_mapping


def load(data: object) -> CameraConfig:
    return from_mapping(CameraConfig, data, where="cameras.yaml")


def test_a_full_config_loads() -> None:
    cfg = load(
        {
            "name": "wrist",
            "driver": "bus",
            "topic": "/camera/color/image_raw",
            "rate_hz": 15,
            "crop": [10, 20, 300, 200],
            "resize": [128, 128],
        }
    )
    assert cfg.crop == (10, 20, 300, 200) and cfg.resize == (128, 128) and cfg.rate_hz == 15.0
    assert cfg.image_type == "sensor_msgs/msg/Image"
    assert cfg.period_s == pytest.approx(1 / 15)


def test_every_setting_is_described() -> None:
    assert all(doc for _, _, _, doc in describe_settings(CameraConfig))


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"driver": "source"}, "name: a camera needs a name"),
        ({"name": "c", "driver": "gige"}, "driver: 'gige' is not one of"),
        ({"name": "c", "driver": "bus"}, "driver 'bus' needs a topic"),
        ({"name": "c", "driver": "opencv"}, "driver 'opencv' needs a device"),
        ({"name": "c", "driver": "source", "dead_after_periods": 1}, "dead_after_periods: 1 is below the minimum 2"),
        ({"name": "c", "driver": "source", "jpeg_quality": 80}, "unknown key 'jpeg_quality'"),  # the robot node's
        ({"name": "c", "driver": "source", "crop": [0, 0, 0, 5]}, "needs x, y >= 0 and width, height > 0"),
        ({"name": "c", "driver": "source", "resize": [64]}, "resize: 64 fits none|expected 2 items"),
        ({"name": "c", "driver": "source", "quality": 3}, "unknown key 'quality'"),
        ({"name": "c", "driver": "bus", "topic": "/t", "msg_type": "sensor_msgs/msg/PointCloud2"}, "msg_type"),
        ({"name": "c", "driver": "source", "rate_hz": 0}, "rate_hz: 0.0 is below the minimum 0.1"),
    ],
)
def test_bad_configs_are_refused_with_the_key(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=f"^cameras.yaml: .*({fragment})"):
        load(data)


def test_compressed_type_from_the_topic_name() -> None:
    cfg = load({"name": "c", "driver": "bus", "topic": "/camera/color/image_raw/compressed"})
    assert cfg.image_type == "sensor_msgs/msg/CompressedImage"


def test_build_camera_picks_the_driver(make_bus: Callable[..., ZenohBus]) -> None:
    assert isinstance(build_camera(load({"name": "a", "device": "0"})), OpenCVCamera)
    bus_cfg = load({"name": "b", "driver": "bus", "topic": "/img"})
    assert isinstance(build_camera(bus_cfg, bus=make_bus("robot")), BusCamera)
    with pytest.raises(CameraUnavailableError, match="'b': driver 'bus' needs the node's bus"):
        build_camera(bus_cfg)
    source_cfg = load({"name": "s", "driver": "source"})
    assert isinstance(build_camera(source_cfg, source=CountingSource()), SourceCamera)
    with pytest.raises(CameraUnavailableError, match="'s': driver 'source' needs a frame source"):
        build_camera(source_cfg)


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="'c': rate_hz and the timeouts must be positive"):
        CameraConfig(name="c", driver="source", rate_hz=0.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"driver": "realsense", "device": "0"}, "device: a setting of driver 'opencv', but driver 'realsense'"),
        ({"driver": "opencv", "device": "0", "serial": "123"}, "serial: a setting of driver 'realsense'"),
        ({"driver": "realsense", "topic": "/c/image_raw"}, "topic: a setting of driver 'bus'"),
        ({"driver": "bus", "topic": "/c", "loop": True}, "loop: a setting of driver 'opencv', but driver 'bus'"),
    ],
)
def test_a_setting_of_another_camera_driver_is_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=f"cameras.yaml: {message}"):
        load({"name": "wrist", **data})
