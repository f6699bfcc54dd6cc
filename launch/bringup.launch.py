"""ros2 launch user bringup.launch.py [config:=FILE] [run_dir:=DIR] [resume:=true]: a deployment on rclpy.

It reads the same deployment YAML as `user bringup`, through the same code (`user.deploy`), so both
launchers start the same nodes with the same settings. Each node's settings become typed ROS parameters;
its respawn limit (`max_respawns`) is kept here with launch's own events (Humble's launch has no
`respawn_max_retries`), and its shutdown allowance (`shutdown_timeout_s`) is launch's `sigterm_timeout`.
Only launch and launch_ros names that exist on Humble are used.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription, logging
from launch.actions import DeclareLaunchArgument, OpaqueFunction, TimerAction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from user.deploy.ros_launch import RosNodeLaunch, prepare

_log = logging.get_logger("user.launch")


def _config_dir():
    return os.path.join(get_package_share_directory("user"), "config")


def _node(spec: RosNodeLaunch, respawns: int = 0) -> Node:
    launch = spec.launch

    def on_exit(event, context):
        if context.is_shutdown or not launch.may_respawn(respawns):
            if not context.is_shutdown and event.returncode != 0:
                _log.error(f"{launch.name} exited with code {event.returncode}; not respawned")
            return None
        delay = launch.respawn_delay_s
        _log.warning(f"{launch.name} exited with code {event.returncode}; respawning in {delay:.1f} s")
        return [TimerAction(period=delay, actions=[_node(spec, respawns + 1)])]

    return Node(
        package="user",
        executable="user_node",
        name=launch.name,
        arguments=[launch.kind],
        parameters=[spec.parameters],
        additional_env=launch.env,
        output="screen",
        sigterm_timeout=spec.sigterm_timeout,
        sigkill_timeout=spec.sigkill_timeout,
        on_exit=on_exit,
    )


def _nodes(context, *args, **kwargs):
    _run_dir, specs = prepare(
        LaunchConfiguration("config").perform(context),
        LaunchConfiguration("run_dir").perform(context),
        LaunchConfiguration("resume").perform(context).lower() == "true",
        search_dirs=[_config_dir()],
    )
    return [_node(spec) for spec in specs]


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "config",
                default_value=os.path.join(_config_dir(), "default.yaml"),
                description="deployment YAML: a path, or a file name in share/user/config",
            ),
            DeclareLaunchArgument(
                "run_dir", default_value="", description="run directory (default: a fresh runs/<name>[-n])"
            ),
            DeclareLaunchArgument("resume", default_value="false", description="true: continue the run in run_dir"),
            OpaqueFunction(function=_nodes),
        ]
    )
