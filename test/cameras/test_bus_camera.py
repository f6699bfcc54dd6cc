"""`BusCamera` on both runtimes (Zenoh, and rclpy over DDS): Image and CompressedImage on the topics and with
the QoS realsense2_camera (and image_transport's compressed plugin) publishes them:
`/<namespace>/<camera>/color/image_raw[/compressed]`, reliable (the driver's default, SYSTEM_DEFAULT), which
a best-effort camera subscription matches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from test.cameras.image_msgs import rgb_to_compressed_msg, rgb_to_image_msg
from test.cameras.sources import config
from test.conftest import wait_until
from user.bus.base import BEST_EFFORT, RELIABLE, Bus
from user.cameras import BusCamera, CameraOpenError
from user.interfaces.codec import default_codec

MakeBus = Callable[..., Bus]
STAMP = 1_700_000_000_123_456_789


def pattern() -> np.ndarray:
    rgb = np.zeros((24, 32, 3), dtype=np.uint8)
    rgb[..., 0] = np.arange(32, dtype=np.uint8)[None, :] * 8
    rgb[..., 1] = np.arange(24, dtype=np.uint8)[:, None] * 10
    rgb[..., 2] = 77
    return rgb


def publish_until(publish: Callable[[], None], done: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Publish until `done` (best effort: early messages may go before the subscription is matched)."""

    def step() -> bool:
        publish()
        return done()

    return wait_until(step, timeout_s, 0.05)


@pytest.fixture
def make_bus(make_any_bus: MakeBus) -> MakeBus:
    """Buses of both runtimes."""
    return make_any_bus


def test_raw_image_topic(make_bus: MakeBus, topic: str) -> None:
    codec = default_codec()
    image_topic = f"{topic}/camera/color/image_raw"
    publisher = make_bus("realsense").create_publisher(image_topic, "sensor_msgs/msg/Image", RELIABLE)
    camera = BusCamera(config("wrist", driver="bus", topic=image_topic), make_bus("robot"))
    assert camera.typename == "sensor_msgs/msg/Image"
    payload = codec.encode(rgb_to_image_msg(pattern(), STAMP, "camera_color_optical_frame", codec))
    with camera:
        assert publish_until(lambda: publisher.publish(payload), lambda: camera.poll() is not None)
        frame = camera.latest(max_age_s=5.0)
    assert np.array_equal(frame.rgb, pattern())
    assert frame.hardware_stamp_ns == STAMP and frame.stamp_ns == STAMP
    assert frame.camera == "wrist"


def test_compressed_topic_is_chosen_by_its_name(make_bus: MakeBus, topic: str) -> None:
    codec = default_codec()
    image_topic = f"{topic}/camera/color/image_raw/compressed"
    publisher = make_bus("pub").create_publisher(image_topic, "sensor_msgs/msg/CompressedImage", RELIABLE)
    camera = BusCamera(config("front", driver="bus", topic=image_topic, resize=(16, 12)), make_bus("robot"))
    assert camera.typename == "sensor_msgs/msg/CompressedImage"
    payload = codec.encode(rgb_to_compressed_msg(pattern(), 0, "front", codec, quality=95))
    with camera:
        assert publish_until(lambda: publisher.publish(payload), lambda: camera.poll() is not None)
        frame = camera.latest(max_age_s=5.0)
        assert frame.rgb.shape == (12, 16, 3)
        assert frame.hardware_stamp_ns is None  # a zero header stamp means none
        assert abs(int(frame.rgb[..., 2].mean()) - 77) <= 3


def test_malformed_messages_are_counted_and_capture_goes_on(make_bus: MakeBus, topic: str) -> None:
    codec = default_codec()
    publisher = make_bus("pub").create_publisher(topic, "sensor_msgs/msg/Image", BEST_EFFORT)
    camera = BusCamera(config("cam", driver="bus", topic=topic), make_bus("robot"))
    bad = rgb_to_image_msg(pattern(), STAMP, "x", codec)
    bad.encoding = "16UC1"
    with camera:
        assert publish_until(lambda: publisher.publish(b"\x00\x01\x00\x00garbage"), lambda: camera.health().errors > 0)
        assert "bad message on" in camera.health().last_error
        assert publish_until(
            lambda: publisher.publish(codec.encode(bad)), lambda: "16UC1" in camera.health().last_error
        )
        good = codec.encode(rgb_to_image_msg(pattern(), STAMP, "x", codec))
        assert publish_until(lambda: publisher.publish(good), lambda: camera.poll() is not None)


def test_unsubscribes_on_close(make_bus: MakeBus, topic: str) -> None:
    bus = make_bus("robot")
    camera = BusCamera(config("cam", driver="bus", topic=topic), bus)
    camera.open()
    assert camera._subscription is not None
    camera.close()
    assert camera._subscription is None and not camera.is_open


def test_subscription_failure_is_an_open_error(make_bus: MakeBus, topic: str) -> None:
    bus = make_bus("robot")
    bus.close()
    with pytest.raises(CameraOpenError, match="'cam': cannot subscribe to topic"):
        BusCamera(config("cam", driver="bus", topic=topic), bus).open()
