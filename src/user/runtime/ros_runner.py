"""Run one node on rclpy: what `ros2 launch user bringup.launch.py` starts (`user_node KIND --ros-args ...`).

The node gets its own rclpy context (so rclpy installs no signal handlers of its own) spun on a
background thread; SIGINT/SIGTERM are handled exactly as on the Zenoh runtime (`user.runtime.runner`): the
node is destroyed while its bus still works, within the allowance the launcher passes in
`USER_SHUTDOWN_DEADLINE_S`, then the executor and context are shut down. Exit codes and the status line are
those of `user.runtime.status` (a bad setting: 2, never respawned by the launch file).
"""

from __future__ import annotations

import logging
import sys

from user.runtime.kinds import UnknownNodeKindError, load_kind
from user.runtime.logs import setup_logging
from user.runtime.runner import StopSignal, refuse_start, serve
from user.runtime.status import CONFIG_ERROR, EXIT_CONFIG_ERROR, EXIT_FAILED, FAILED, STARTING, write_status

_log = logging.getLogger("user.ros_runner")


def split_kind(argv: list[str]) -> tuple[str, list[str]]:
    """(`KIND`, rclpy arguments) from `[node] KIND ... --ros-args ...`."""
    before = argv[: argv.index("--ros-args")] if "--ros-args" in argv else list(argv)
    positional = [a for a in before if not a.startswith("-") and a != "node"]
    if not positional:
        raise UnknownNodeKindError("no node kind given before --ros-args")
    return positional[0], argv


def run_ros_node(argv: list[str]) -> int:
    """Start the node named by `argv` on rclpy; returns the process exit code."""
    from user.bus.ros_runtime import RosRuntime
    from user.bus.ros_types import RosUnavailableError

    stop = StopSignal()
    write_status(STARTING)
    try:
        kind, ros_args = split_kind(argv)
        load_kind(kind)
    except (UnknownNodeKindError, ImportError) as exc:  # RosUnavailableError is an ImportError
        return refuse_start(stop.name, (CONFIG_ERROR, EXIT_CONFIG_ERROR), str(exc), stop)
    stop.name = kind
    try:
        runtime = RosRuntime(kind, args=ros_args)
    except RosUnavailableError as exc:
        return refuse_start(kind, (CONFIG_ERROR, EXIT_CONFIG_ERROR), str(exc), stop)
    except Exception as exc:  # rcl refused to start (a bad --ros-args, no DDS): one line, not a traceback
        return refuse_start(kind, (FAILED, EXIT_FAILED), f"{type(exc).__name__}: {exc}", stop)
    stop.name = runtime.bus.name
    return serve(runtime.bus.name, kind, runtime.bus, runtime.close, stop)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `user_node` executable (ros2 launch / ros2 run)."""
    from user.runtime.priority import apply_niceness_from_env

    setup_logging()
    apply_niceness_from_env()
    return run_ros_node(list(sys.argv[1:] if argv is None else argv))
