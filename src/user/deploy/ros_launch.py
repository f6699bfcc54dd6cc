"""What `launch/bringup.launch.py` starts, computed without ROS: one entry per node of a deployment.

The ROS launch file is thin: it turns each `RosNodeLaunch` into a launch_ros `Node` action. Here, each
node's settings are checked against its kind's parameters and encoded as typed ROS parameters
(`user.bus.ros_params.encode`): a bad setting fails the launch with one line naming the node and key,
before any process starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from user.bus.ros_params import encode
from user.config.flat import unflatten
from user.config.strict import ConfigError
from user.deploy.commands import NodeLaunch, launches
from user.deploy.deployment import Deployment, load, resolve_path
from user.deploy.run_dir import bind, continue_episode_ids, fresh_run_dir, save
from user.runtime.kinds import load_kind

SIGKILL_AFTER_SIGTERM_S = 2.0  # after SIGTERM, how long a node gets before SIGKILL


@dataclass(frozen=True)
class RosNodeLaunch:
    """One node as ROS 2 launch starts it."""

    launch: NodeLaunch  # name, kind, respawn policy, environment, shutdown allowance
    parameters: dict[str, Any]  # typed ROS parameter values by dotted name

    @property
    def sigterm_timeout(self) -> str:
        """launch's `sigterm_timeout` (SIGINT -> SIGTERM), as the string launch expects."""
        return f"{self.launch.shutdown_timeout_s:g}"

    @property
    def sigkill_timeout(self) -> str:
        return f"{SIGKILL_AFTER_SIGTERM_S:g}"


def ros_parameters(launch: NodeLaunch) -> dict[str, Any]:
    """The node's settings as typed ROS parameters (raises ConfigError on a bad setting)."""
    spec = load_kind(launch.kind).Params
    return encode(spec, unflatten(launch.parameters), where=f"node {launch.name!r} ({launch.kind})")


def ros_launches(deployment: Deployment) -> list[RosNodeLaunch]:
    return [RosNodeLaunch(launch, ros_parameters(launch)) for launch in launches(deployment)]


def prepare(config: str, run_dir: str, resume: bool, search_dirs: list[str | Path]) -> tuple[Path, list[RosNodeLaunch]]:
    """Load the deployment, bind it to its run directory (saved there), and encode every node."""
    path = resolve_path(config, search_dirs)
    deployment = load(path)
    run_path = Path(run_dir) if run_dir else fresh_run_dir(deployment)
    bound = bind(deployment, run_path)
    if resume:
        bound = continue_episode_ids(bound, run_path)
    try:
        nodes = ros_launches(bound)
    except ConfigError as exc:  # a node's settings: say which file they came from (no run directory is made)
        raise ConfigError(f"{path}: {exc}") from None
    save(deployment, run_path)
    return run_path, nodes
