"""The rclpy adapter stays out of the way where ROS is absent, and its name mapping is sound.

What it does on real rclpy and DDS is the Bus contract (test_bus_contract.py, both runtimes) and the
launch tests (test/deploy/test_ros_launch.py).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from user.bus.names import resolve
from user.bus.ros_types import TOKEN_TOPIC_PREFIX, token_key, token_topic


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


WITHOUT_RCLPY = "import sys; sys.modules['rclpy'] = None\n"  # as if ROS 2 were not installed


def test_making_a_ros_bus_without_ros_fails_clearly() -> None:
    code = WITHOUT_RCLPY + (
        "from user.bus.ros_bus import RosBus\nfrom user.bus.ros_types import RosUnavailableError\n"
        "try:\n    RosBus(object())\nexcept RosUnavailableError as exc:\n    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "source /opt/ros/humble/setup.bash" in proc.stdout, proc.stderr
    code = WITHOUT_RCLPY + "from user.cli.main import main; sys.exit(main(['node', 'talker', '--ros-args']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "needs rclpy" in proc.stderr, proc.stderr


@pytest.mark.parametrize("key", ["@user/runtime/robot_1/abc", "@user/hw/gpu0@cloud", "a b/%c"])
def test_token_topics_are_valid_ros_names_and_reversible(key: str) -> None:
    topic = token_topic(key)
    assert topic.startswith(TOKEN_TOPIC_PREFIX)
    assert resolve(topic) == topic
    assert token_key(topic) == key


def test_ros_runner_finds_the_kind_before_ros_args() -> None:
    from user.runtime.ros_runner import split_kind

    kind, args = split_kind(["talker", "--ros-args", "-r", "__node:=t1"])
    assert kind == "talker" and args[-2:] == ["-r", "__node:=t1"]
