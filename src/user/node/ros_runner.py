"""Run one node on rclpy: what `ros2 launch user bringup.launch.py` starts (`user_node KIND --ros-args ...`).

Verified only against rclpy's documented Humble API: ROS 2 cannot be installed on our CI machines.
"""

from __future__ import annotations

import logging

from user.config.strict import ConfigError
from user.nodes import UnknownNodeKindError, load_kind

_log = logging.getLogger("user.ros_runner")


def split_kind(argv: list[str]) -> tuple[str, list[str]]:
    """(`KIND`, rclpy arguments) from `[node] KIND ... --ros-args ...`."""
    before = argv[: argv.index("--ros-args")] if "--ros-args" in argv else list(argv)
    positional = [a for a in before if not a.startswith("-") and a != "node"]
    if not positional:
        raise UnknownNodeKindError("no node kind given before --ros-args")
    return positional[0], argv


def run_ros_node(argv: list[str]) -> int:
    from user.bus.ros_bus import RosBus, RosUnavailableError, require_rclpy

    try:
        rclpy = require_rclpy()
    except RosUnavailableError as exc:
        _log.error("%s", exc)
        return 2
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    try:
        kind, ros_args = split_kind(argv)
        factory = load_kind(kind)
    except UnknownNodeKindError as exc:
        _log.error("%s", exc)
        return 2
    rclpy.init(args=ros_args)
    ros_node = rclpy.create_node(kind, automatically_declare_parameters_from_overrides=True)
    bus = RosBus(ros_node)
    try:
        node = factory(bus)
    except ConfigError as exc:
        ros_node.get_logger().error(str(exc))
        bus.close()
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=2)  # default group serialises callbacks; clients reenter
    executor.add_node(ros_node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy()
        bus.close()
        rclpy.try_shutdown()
    return 0
