"""The node processes of a deployment, as command lines: the single source both launchers build from."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from user.deploy.deployment import Deployment, NodeConfig
from user.deploy.priority import ENV_NICE


@dataclass(frozen=True)
class NodeLaunch:
    """What it takes to start one node, on either runtime."""

    name: str
    kind: str
    parameters: dict[str, Any]  # flat, dotted keys for nested values (ROS 2 parameter style)
    respawn: bool
    respawn_delay_s: float
    output: str  # "log" or "screen"
    env: dict[str, str]

    def zenoh_command(self) -> list[str]:
        """argv of the process on the Zenoh runtime."""
        return [
            sys.executable,
            "-m",
            "user",
            "node",
            self.kind,
            "--name",
            self.name,
            "--params-json",
            json.dumps(unflatten(self.parameters)),
        ]


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: ROS 2 parameters are flat with dotted names."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def unflatten(params: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `flatten`."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        parts = key.split(".")
        cursor = out
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return out


def node_launch(node: NodeConfig) -> NodeLaunch:
    return NodeLaunch(
        name=node.name,
        kind=node.kind,
        parameters=flatten(node.params),
        respawn=node.respawn,
        respawn_delay_s=node.respawn_delay_s,
        output=node.output,
        env={**node.env, **({ENV_NICE: str(node.nice)} if node.nice else {})},
    )


def launches(deployment: Deployment) -> list[NodeLaunch]:
    """Every node of the deployment, in start order."""
    return [node_launch(n) for n in deployment.nodes]
