"""`teleop` and `pedal` nodes with scripted devices, on both runtimes (in-process buses: Zenoh through a real
router, ROS 2 through rclpy and DDS)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.base import Bus
from user.config.strict import ConfigError, from_mapping
from user.nodes.pedal import MODE_EPISODE_END, MODE_STEP, PedalNode, PedalParams
from user.nodes.teleop import TeleopNode, TeleopParams
from user.robot_loop.gate import SOURCE_HUMAN
from user.runtime.node import Node
from user.teleop import DeviceError, SpaceMouseTeleop

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def make_bus(make_any_bus: Callable[..., Bus]) -> Callable[..., Bus]:
    return make_any_bus


class Inbox:
    def __init__(self, bus: Bus, topic: str, typename: str) -> None:
        self.node = Node(bus)
        self.items: list[Any] = []
        self._lock = threading.Lock()
        self.node.create_subscription(topic, typename, self._on)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self.items.append(msg)

    def count(self) -> int:
        with self._lock:
            return len(self.items)


def test_scripted_teleop_publishes_human_interventions_only_while_active(make_bus: Callable[..., Bus]) -> None:
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    inbox = Inbox(make_bus("inbox"), f"/{robot}/intervention", "user/msg/Action")
    params = {
        "robot_id": robot,
        "device": "scripted",
        "rate_hz": 50.0,
        "scripted_action": [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, -1.0],
        "scripted_start_s": 0.3,
        "scripted_duration_s": 0.4,
    }
    node = TeleopNode(make_bus("teleop", params, TeleopParams))
    try:
        assert wait_until(lambda: inbox.count() > 0, 10.0)
        # deadman: once the window is over, nothing more is published
        assert wait_until(lambda: node.published > 0 and not node._active, 10.0)
        assert wait_until(lambda: inbox.count() == node.published, 5.0)
        settled = inbox.count()
        assert not wait_until(lambda: inbox.count() > settled, 0.3)
        assert 5 <= settled <= 30
        for msg in inbox.items:
            assert msg.intervened and msg.source == SOURCE_HUMAN and msg.robot_id == robot
            assert list(msg.data) == pytest.approx([0.0, 0.0, 0.5, 0.0, 0.0, 0.0, -1.0])
    finally:
        node.destroy()


def test_scripted_pedal_maps_keys_to_human_rewards(make_bus: Callable[..., Bus], topic: str) -> None:
    inbox = Inbox(make_bus("inbox"), topic, "user/msg/HumanReward")
    params = {
        "source": "scripted",
        "topic": topic,
        "robot_id": "arm",
        "scripted_presses": [[0.2, "KEY_B"], [0.3, "KEY_Z"], [0.4, "KEY_A"], [0.5, "KEY_C"]],
    }
    node = PedalNode(make_bus("pedal", params, PedalParams))
    try:
        assert wait_until(lambda: inbox.count() == 3, 10.0), inbox.items
        step, success, failure = inbox.items
        assert (step.mode, step.reward, step.success) == (MODE_STEP, 1.0, False)
        assert (success.mode, success.reward, success.success) == (MODE_EPISODE_END, 1.0, True)
        assert (failure.mode, failure.reward, failure.success) == (MODE_EPISODE_END, 0.0, False)
        assert all(m.source == "pedal0" and m.robot_id == "arm" for m in inbox.items)
    finally:
        node.destroy()


def test_missing_evdev_or_device_is_a_clear_startup_error(make_bus: Callable[..., Bus]) -> None:
    with pytest.raises(ConfigError, match="/dev/input/no_such_pedal"):
        PedalNode(make_bus("pedal", {"source": "evdev", "device_path": "/dev/input/no_such_pedal"}, PedalParams))


def test_missing_pyspacemouse_names_the_package() -> None:
    try:
        import pyspacemouse  # noqa: F401
    except ImportError:
        with pytest.raises(DeviceError, match=r"pip install 'user\[spacemouse\]'"):
            SpaceMouseTeleop()
    else:
        pytest.skip("pyspacemouse is installed")


@pytest.mark.parametrize(
    ("params_cls", "data", "message"),
    [
        (
            PedalParams,
            {"source": "scripted", "device_path": "/dev/input/event3"},
            "device_path: a setting of source 'evdev'",
        ),
        (PedalParams, {"scripted_presses": [[0.5, "KEY_A"]]}, "scripted_presses: a setting of source 'scripted'"),
        (TeleopParams, {"device": "scripted", "deadzone": 0.1}, "deadzone: a setting of device 'spacemouse'"),
        (TeleopParams, {"scripted_duration_s": 2.0}, "scripted_duration_s: a setting of device 'scripted'"),
    ],
)
def test_a_setting_of_another_input_source_is_refused(params_cls: type, data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^n.yaml: {message}"):
        from_mapping(params_cls, data, where="n.yaml")
