"""ros2 launch user bringup.launch.py [config:=FILE] [run_dir:=DIR] [resume:=true]: the deployment's nodes as
launch_ros Node actions.

It reads the same deployment YAML as `user bringup` through the same code (user.deploy), so the ROS 2
and Zenoh launchers always start the same node set with the same parameters.
"""

import os
from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from user.deploy.commands import launches
from user.deploy.deployment import load
from user.deploy.run_dir import bind, continue_episode_ids, fresh_run_dir, save


def _config_dir():
    return os.path.join(get_package_share_directory("user"), "config")


def _nodes(context, *args, **kwargs):
    config = LaunchConfiguration("config").perform(context)
    deployment = load(config, search_dirs=[_config_dir()])
    run_dir = LaunchConfiguration("run_dir").perform(context)
    resume = LaunchConfiguration("resume").perform(context).lower() == "true"
    run_path = Path(run_dir) if run_dir else fresh_run_dir(deployment)
    save(deployment, run_path)
    deployment = bind(deployment, run_path)
    if resume:
        deployment = continue_episode_ids(deployment, run_path)
    return [
        Node(
            package="user",
            executable="user_node",
            name=launch.name,
            arguments=[launch.kind],
            parameters=[launch.parameters],
            respawn=launch.respawn,
            respawn_delay=launch.respawn_delay_s,
            additional_env=launch.env,
            output="screen",
        )
        for launch in launches(deployment)
    ]


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
