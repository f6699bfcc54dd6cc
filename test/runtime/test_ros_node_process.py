"""A node as its own process on the ROS runtime (the installed `user_node KIND --ros-args ...`, as launch
starts it): malformed input, signals, startup errors, and what it imports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from test.conftest import wait_until
from test.helpers.processes import LoggedProcess, started_processes
from user.bus.base import Bus
from user.runtime.status import ENV_STATUS_FILE, NodeStatus, read_status

pytestmark = pytest.mark.ros


def user_node() -> str:
    """The executable colcon installed (what `ros2 run user user_node` finds; launch starts it directly)."""
    return str(Path(os.environ["USER_ROS_INSTALL"]) / "lib" / "user" / "user_node")


@pytest.fixture
def ros_node(tmp_path: Path) -> Iterator[Callable[..., LoggedProcess]]:
    """`ros_node(*args)`: the installed `user_node ARGS`."""
    yield from started_processes(lambda args: [user_node(), *args], None, tmp_path)


def test_a_malformed_message_is_dropped_and_the_node_keeps_running(
    ros_node: Callable[..., LoggedProcess], make_ros_bus: Callable[..., Bus], topic: str
) -> None:
    from user.interfaces import default_codec

    listener = ros_node("listener", "--ros-args", "-r", "__node:=ears", "-p", f"topic:={topic}")
    assert listener.wait_for("running"), listener.text()
    pub = make_ros_bus("sender").create_publisher(topic, "std_msgs/msg/String")
    assert pub.wait_for_subscribers(10.0)  # type: ignore[attr-defined]
    pub.publish(b"\x00\x01\x00\x00\xff\xff\xff\x7fgarbage")  # a string length far beyond the payload
    codec = default_codec()
    pub.publish(codec.encode(codec.msg_class("std_msgs/msg/String")(data="still alive")))
    assert listener.wait_for('I heard: "still alive"'), listener.text()
    text = listener.text()
    assert text.count("dropped a malformed message") == 1 and f"on {topic} (std_msgs/msg/String" in text
    assert listener.stop()[0] == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_node_within_5s_with_exit_0(
    ros_node: Callable[..., LoggedProcess], topic: str, sig: int
) -> None:
    talker = ros_node("talker", "--ros-args", "-p", f"topic:={topic}", "-p", "rate_hz:=50.0")
    assert talker.wait_for("Publishing"), talker.text()
    code, elapsed = talker.stop(sig)
    assert code == 0, talker.text()
    assert elapsed < 5.0
    assert "shutting down" in talker.text()


def test_a_node_stopped_by_sigint_leaves_stopped_as_its_status(tmp_path: Path, topic: str) -> None:
    """As launch stops it on Ctrl-C: the status file the launch file and `user report` read says `stopped`."""
    status = tmp_path / "talker.status"
    env = dict(os.environ, **{ENV_STATUS_FILE: str(status)})
    argv = [user_node(), "talker", "--ros-args", "-p", f"topic:={topic}"]
    talker = LoggedProcess(argv, env, tmp_path / "talker.log")
    try:
        assert wait_until(lambda: read_status(status) == NodeStatus("running"), 30.0), talker.text()
    finally:
        code, _ = talker.stop(signal.SIGINT)
    assert code == 0, talker.text()
    assert read_status(status) == NodeStatus("stopped"), status.read_text()


def test_bad_parameters_fail_at_startup_naming_them(ros_node: Callable[..., LoggedProcess]) -> None:
    node = ros_node("talker", "--ros-args", "-p", "rate_hz:=fast")
    assert node.proc.wait(30) == 2
    assert "rate_hz" in node.text() and "expected a number" in node.text(), node.text()
    node = ros_node("talker", "--ros-args", "-p", "rat_hz:=3")
    assert node.proc.wait(30) == 2
    assert "unknown key 'rat_hz'" in node.text(), node.text()
    node = ros_node("talkr", "--ros-args")
    assert node.proc.wait(30) == 2
    assert "unknown node kind 'talkr'" in node.text()


@pytest.mark.parametrize("kind", ["robot", "pedal", "teleop", "expert", "monitor", "reward", "hardware_announcer"])
def test_a_ros_node_imports_only_what_its_kind_needs(kind: str) -> None:
    """What `user_node KIND` imports before the node starts: no learning stack for robots and inputs."""
    code = (
        "import sys\n"
        "import user.runtime.ros_runner\n"
        "from user.bus.ros_runtime import RosRuntime\n"
        f"from user.runtime.kinds import load_kind; load_kind({kind!r})\n"
        "rt = RosRuntime('import_probe'); rt.close()\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'tensorboard') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", f"{kind}: {proc.stdout}"
