"""Every node's settings checked against its kind's parameters before any process starts.

The same check each node makes at its start (`Bus.declare_parameters` builds the kind's `Params` with
`from_mapping`) and the ROS launch file makes when it encodes them (`user.deploy.ros_launch`), so a typo in a
node's `params` costs no started process and no run directory: one line names the file, the node, its kind, the
key and the nearest known key. Then the nodes are checked against each other: learners apart, every rollout,
robot and monitor tied to its learner (`user.deploy.learners`).
"""

from __future__ import annotations

from pathlib import Path

from user.config.strict import ConfigError, from_mapping
from user.deploy.commands import launches
from user.deploy.deployment import Deployment
from user.deploy.learners import Configured, check_learners
from user.runtime.kinds import load_kind


def check_node_params(deployment: Deployment, source: str | Path) -> None:
    """Raise ConfigError ("<source>: node 'x' (kind): key: ...") for the first node whose settings are wrong,
    else ("<source>: ...") for the first clash between nodes."""
    configured = []
    for launch in launches(deployment):  # the settings exactly as the node's command line carries them
        spec = load_kind(launch.kind).Params
        params = from_mapping(spec, launch.parameters, where=f"{source}: node {launch.name!r} ({launch.kind})")
        configured.append(Configured(launch.name, launch.kind, params))
    try:
        check_learners(configured)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
