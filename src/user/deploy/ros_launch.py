"""What `launch/bringup.launch.py` starts, computed without ROS: one entry per node of a deployment.

The ROS launch file is thin: it turns each `RosNodeLaunch` into a launch_ros `Node` action and applies the
respawn rules of `user.deploy.respawn` (the same as `user bringup`'s) on each exit. Here, each node's settings
are checked against its kind's parameters and encoded as typed ROS parameters (`user.bus.ros_params.encode`):
a bad setting fails the launch with one line naming the node and key, before any process starts. Each node
writes its status line (`user.runtime.status`) to `<log_dir>/<name>.status`, where the launch file reads why it
exited and whether it reported running within its start deadline; when a node could not write how it ended
(SIGKILL, a crash), the launch file writes it there from the exit code (`RosNodeLaunch.exited`).
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from user.bus.ros_params import encode
from user.config.strict import ConfigError
from user.deploy.commands import NodeLaunch, launches
from user.deploy.deployment import Deployment, load, resolve_path
from user.deploy.node_params import check_node_params
from user.deploy.respawn import NodeLife
from user.deploy.run_dir import bind, continue_episode_ids, fresh_run_dir, save
from user.distributed.ranks import torchrun_command
from user.runtime.kinds import load_kind
from user.runtime.status import ENV_STATUS_FILE, REASONED, RUNNING, read_status, record_exit

SIGKILL_AFTER_SIGTERM_S = 2.0  # after SIGTERM, how long a node gets before SIGKILL
START_CHECK_MARGIN_S = 0.5  # the start deadline is checked this long after it passed


class NodeGoneError(RuntimeError):
    """A required node is gone for good. Raised from the launch file's exit handler: Humble's launch then logs
    the message in one line, shuts the other nodes down and `ros2 launch` exits with code 1."""


@dataclass(frozen=True)
class RosNodeLaunch:
    """One node as ROS 2 launch starts it."""

    launch: NodeLaunch  # name, kind, respawn policy, environment, shutdown allowance
    parameters: dict[str, Any]  # typed ROS parameter values by dotted name
    status_file: Path  # the node's status line

    @property
    def env(self) -> dict[str, str]:
        """The node's extra environment: the deployment's, and where it writes its status."""
        return {**self.launch.env, ENV_STATUS_FILE: str(self.status_file)}

    @property
    def prefix(self) -> str | None:
        """What launch puts before the node's executable (launch_ros `Node(prefix=...)`): for a learner on several
        ranks, torchrun starting this machine's ranks, each running the node's `user_node` command line as it is
        (`user.nodes.ros_entry` makes the lead the ROS node and the others its followers); else None."""
        if self.launch.ranks is None:
            return None
        return shlex.join(torchrun_command(self.launch.ranks, [], script=True))

    @property
    def sigterm_timeout(self) -> str:
        """launch's `sigterm_timeout` (SIGINT -> SIGTERM), as the string launch expects."""
        return f"{self.launch.shutdown_timeout_s:g}"

    @property
    def sigkill_timeout(self) -> str:
        return f"{SIGKILL_AFTER_SIGTERM_S:g}"

    @property
    def start_check_s(self) -> float:
        """When (seconds after the node's start) the launch file checks that it reported running."""
        return self.launch.start_timeout_s + START_CHECK_MARGIN_S

    def starting(self) -> None:
        """Before each start (a respawn too): a status left by an earlier start says nothing about this one (its
        recorded exit would read as the reason of a start killed before it wrote its own status)."""
        with contextlib.suppress(FileNotFoundError):
            self.status_file.unlink()

    def exit_reason(self) -> str:
        """The one-line reason the node wrote for its failure (or for completing the run), or ''."""
        status = read_status(self.status_file)
        return status.reason if status is not None and status.state in REASONED else ""

    def exited(self, returncode: int | None) -> str:
        """The node's process exited with `returncode`: its reason (`exit_reason`, read first), and its status
        file made to say how it ended when the node could not write that itself (`record_exit`)."""
        reason = self.exit_reason()
        if returncode is not None:
            record_exit(self.status_file, returncode, reason)
        return reason

    def late_start(self, life: NodeLife, now: float) -> str | None:
        """At its start deadline: None when the node reported running; else the line to log before stopping it."""
        status = read_status(self.status_file)
        if status is not None and status.state == RUNNING:
            life.reported_running(now)
            return None
        if not life.overdue(now):
            return None
        return f"{self.launch.name} did not report running within {self.launch.start_timeout_s:g} s; stopping it"


SIM_CLOCK_TOPIC = "/clock"  # where ROS 2 nodes with use_sim_time read the time


def uses_sim_clock(nodes: list[RosNodeLaunch]) -> bool:
    """Whether a node of the deployment publishes the simulation time on /clock (rviz then runs on it)."""
    return any(node.parameters.get("clock_topic") == SIM_CLOCK_TOPIC for node in nodes)


def rviz_command(config: str, sim_time: bool) -> list[str]:
    """The rviz2 command line the launch file runs for `rviz:=true`."""
    return ["rviz2", "-d", config, "--ros-args", "-p", f"use_sim_time:={'true' if sim_time else 'false'}"]


def ros_parameters(launch: NodeLaunch) -> dict[str, Any]:
    """The node's settings as typed ROS parameters (raises ConfigError on a bad setting)."""
    spec = load_kind(launch.kind).Params
    return encode(spec, launch.parameters, where=f"node {launch.name!r} ({launch.kind})")


def ros_launches(deployment: Deployment, log_dir: Path) -> list[RosNodeLaunch]:
    return [
        RosNodeLaunch(launch, ros_parameters(launch), log_dir / f"{launch.name}.status")
        for launch in launches(deployment)
    ]


def prepare(config: str, run_dir: str, resume: bool, search_dirs: list[str | Path]) -> tuple[Path, list[RosNodeLaunch]]:
    """Load the deployment, bind it to its run directory (saved there), and encode every node."""
    path = resolve_path(config, search_dirs)
    deployment = load(path)
    run_path = Path(run_dir) if run_dir else fresh_run_dir(deployment)
    bound = bind(deployment, run_path)
    if resume:
        bound = continue_episode_ids(bound, run_path)
    log_dir = Path(bound.log_dir)
    check_node_params(bound, path)  # every node's settings, then the nodes against each other (learners apart)
    try:
        nodes = ros_launches(bound, log_dir)
    except ConfigError as exc:  # a node's settings: say which file they came from (no run directory is made)
        raise ConfigError(f"{path}: {exc}") from None
    save(deployment, run_path)
    log_dir.mkdir(parents=True, exist_ok=True)
    return run_path, nodes
