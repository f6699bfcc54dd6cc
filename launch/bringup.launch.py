"""ros2 launch user bringup.launch.py [config:=FILE] [run_dir:=DIR] [resume:=true] [rviz:=true]: a deployment
on rclpy; `rviz:=true` also opens rviz2 with `rviz_config` (default share/user/config/user.rviz), on the
simulation time when a robot of the deployment publishes it on /clock.

It reads the same deployment YAML as `user bringup`, through the same code (`user.deploy`), so both
launchers start the same nodes with the same settings and the same supervision rules (`user.deploy.respawn`):
each node's settings become typed ROS parameters; on each exit the node's one-line reason (its status file) is
logged with what follows; a configuration error (exit code 2) is never respawned; `max_respawns` is kept here
with launch's own events (Humble's launch has no `respawn_max_retries`) and resets after `respawn_reset_s` of
running; a node that does not report running within `start_timeout_s` is shut down (launch's ShutdownProcess:
SIGINT, then SIGTERM, then SIGKILL); a node that ends the run (exit code 5: the learner reached its
`stop_after`) shuts the launch down cleanly; a learner with `ranks` runs under torchrun (launch's `prefix`), which
restarts its ranks itself; a required node gone for good ends the launch with exit code 1 (an
exception from the exit handler: Humble's launch logs it in one line, shuts the other nodes down and returns 1).
The shutdown allowance (`shutdown_timeout_s`) is launch's `sigterm_timeout`; on Ctrl-C launch signals all nodes
at once. Only launch and launch_ros names that exist on Humble are used.
"""

import os
import time

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription, logging
from launch.actions import DeclareLaunchArgument, EmitEvent, ExecuteProcess, OpaqueFunction, TimerAction
from launch.events import Shutdown, matches_action
from launch.events.process import ShutdownProcess
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from user.deploy.respawn import NodeLife, Outcome, RunCompletion
from user.deploy.ros_launch import NodeGoneError, RosNodeLaunch, prepare, rviz_command, uses_sim_clock

_log = logging.get_logger("user.launch")


def _config_dir():
    return os.path.join(get_package_share_directory("user"), "config")


def _on_exit(spec: RosNodeLaunch, life: NodeLife, this_start: dict):
    def on_exit(event, context):
        this_start["exited"] = True
        reason = spec.exited(event.returncode)  # also on a shutdown: a killed node's status says how it ended
        if context.is_shutdown:
            return None
        verdict = life.exited(event.returncode, reason, time.monotonic())
        if verdict.outcome is Outcome.RESPAWN:
            _log.warning(verdict.line)
            return [TimerAction(period=verdict.delay_s, actions=_start(spec, life))]
        if verdict.outcome is Outcome.FINISHED:
            _log.info(verdict.line)
            return None
        if verdict.outcome is Outcome.COMPLETE:  # every node is stopped as on Ctrl-C; launch returns 0
            _log.info(verdict.line)
            return [EmitEvent(event=Shutdown(reason=verdict.line))]
        if verdict.stops_deployment:
            raise NodeGoneError(verdict.line)
        _log.error(verdict.line)
        return None

    return on_exit


def _start(spec: RosNodeLaunch, life: NodeLife) -> list:
    """The actions of one start of the node: note the time, start it, check its start deadline."""
    launch = spec.launch
    this_start = {"exited": False}
    node = Node(
        package="user",
        executable="user_node",
        name=launch.name,
        arguments=[launch.kind],
        parameters=[spec.parameters],
        prefix=spec.prefix,  # torchrun for a learner on several ranks
        additional_env=spec.env,
        output="screen",
        sigterm_timeout=spec.sigterm_timeout,
        sigkill_timeout=spec.sigkill_timeout,
        on_exit=_on_exit(spec, life, this_start),
    )

    def started(context):
        spec.starting()
        life.started(time.monotonic())

    def check_started(context):
        if this_start["exited"] or context.is_shutdown:
            return None
        line = spec.late_start(life, time.monotonic())
        if line is None:
            return None
        _log.error(line)
        return [EmitEvent(event=ShutdownProcess(process_matcher=matches_action(node)))]

    return [
        OpaqueFunction(function=started),
        node,
        TimerAction(period=spec.start_check_s, actions=[OpaqueFunction(function=check_started)]),
    ]


def _nodes(context, *args, **kwargs):
    _run_dir, specs = prepare(
        LaunchConfiguration("config").perform(context),
        LaunchConfiguration("run_dir").perform(context),
        LaunchConfiguration("resume").perform(context).lower() == "true",
        search_dirs=[_config_dir()],
    )
    completion = RunCompletion.of(spec.launch for spec in specs)  # the run ends when every learner completed
    actions = [action for spec in specs for action in _start(spec, NodeLife(spec.launch, completion))]
    if LaunchConfiguration("rviz").perform(context).lower() == "true":
        command = rviz_command(LaunchConfiguration("rviz_config").perform(context), uses_sim_clock(specs))
        actions.append(ExecuteProcess(cmd=command, name="rviz2", output="screen"))
    return actions


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
            DeclareLaunchArgument("rviz", default_value="false", description="true: open rviz2 beside the nodes"),
            DeclareLaunchArgument(
                "rviz_config",
                default_value=os.path.join(_config_dir(), "user.rviz"),
                description="the rviz2 configuration rviz:=true opens",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
