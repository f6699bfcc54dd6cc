"""The rclpy adapter stays out of the way where ROS is absent, and its name mapping is sound.

rclpy cannot be installed here, so what runs on ROS 2 is checked only this far; see README.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from user.bus.names import resolve
from user.bus.ros_bus import TOKEN_TOPIC_PREFIX, token_key, token_topic


def test_nothing_imports_rclpy_until_a_ros_bus_is_made() -> None:
    code = (
        "import sys, pkgutil, importlib, user\n"
        "for m in pkgutil.walk_packages(user.__path__, 'user.'):\n"
        "    if m.name != 'user.__main__': importlib.import_module(m.name)\n"
        "assert 'rclpy' not in sys.modules, 'rclpy imported'\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == b"ok", proc.stderr.decode()


def test_making_a_ros_bus_without_ros_fails_clearly() -> None:
    from user.bus.ros_bus import RosBus, RosUnavailableError

    with pytest.raises(RosUnavailableError, match="source /opt/ros/humble/setup.bash"):
        RosBus(object())
    proc = subprocess.run(
        [sys.executable, "-m", "user", "node", "talker", "--ros-args"], capture_output=True, timeout=60
    )
    assert proc.returncode == 2 and b"needs rclpy" in proc.stderr


@pytest.mark.parametrize("key", ["@user/node/robot_1/abc", "@user/hw/gpu0@cloud", "a b/%c"])
def test_token_topics_are_valid_ros_names_and_reversible(key: str) -> None:
    topic = token_topic(key)
    assert topic.startswith(TOKEN_TOPIC_PREFIX)
    assert resolve(topic) == topic
    assert token_key(topic) == key


def test_ros_runner_finds_the_kind_before_ros_args() -> None:
    from user.node.ros_runner import split_kind

    kind, args = split_kind(["talker", "--ros-args", "-r", "__node:=t1"])
    assert kind == "talker" and args[-2:] == ["-r", "__node:=t1"]
