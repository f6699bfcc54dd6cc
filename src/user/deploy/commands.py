"""The node processes of a deployment, as command lines: the single source both launchers build from."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from user.config.flat import flatten, unflatten
from user.config.strict import from_mapping
from user.deploy.deployment import Deployment, NodeConfig
from user.distributed.ranks import HOME_ENV, RanksConfig, torchrun_command
from user.runtime.clock import ENV_SIM_CLOCK, sim_clock_topic
from user.runtime.priority import ENV_NICE
from user.runtime.runner import ENV_SHUTDOWN_DEADLINE

SHUTDOWN_MARGIN_S = 0.5  # a node's own deadline for `destroy` ends this much before the launcher's SIGTERM


@dataclass(frozen=True)
class NodeLaunch:
    """What it takes to start one node, on either runtime."""

    name: str
    kind: str
    parameters: dict[str, Any]  # nested, as in the deployment file (dotted keys there expanded: "a.b: 1" = a: {b: 1})
    respawn: bool
    respawn_delay_s: float
    max_respawns: int  # restarts allowed (-1: no limit)
    shutdown_timeout_s: float  # SIGINT -> SIGTERM allowance
    required: bool  # gone for good: the deployment stops
    respawn_reset_s: float  # running this long resets the respawn count
    start_timeout_s: float  # must report running within this
    output: str  # "log" or "screen"
    env: dict[str, str]  # extra environment: the deployment's, niceness, the node's shutdown deadline
    ranks: RanksConfig | None = None  # a learner on several ranks: started by torchrun (None: one process)

    def zenoh_command(self) -> list[str]:
        """argv of the process on the Zenoh runtime (torchrun starting this machine's ranks of a learner that has
        several)."""
        node = ["user", "node", self.kind, "--name", self.name, "--params-json", json.dumps(self.parameters)]
        if self.ranks is not None:
            return torchrun_command(self.ranks, node)
        return [sys.executable, "-m", *node]

    def may_respawn(self, respawns_so_far: int) -> bool:
        """Whether the node is restarted after it exited on its own, having been restarted this often."""
        return self.respawn and (self.max_respawns < 0 or respawns_so_far < self.max_respawns)


def node_launch(node: NodeConfig, deployment: Deployment) -> NodeLaunch:
    timeout = node.shutdown_timeout_s or deployment.shutdown_timeout_s
    clock = sim_clock_topic(
        [(n.kind, n.params) for n in deployment.nodes]
    )  # every node stamps on a simulated robot's time
    # the node's own deadline for `destroy` ends before the launcher's SIGTERM, so it exits by itself
    deadline = {ENV_SHUTDOWN_DEADLINE: f"{max(SHUTDOWN_MARGIN_S, timeout - SHUTDOWN_MARGIN_S):.3f}"}
    ranks = learner_ranks(node)
    return NodeLaunch(
        name=node.name,
        kind=node.kind,
        parameters=unflatten(flatten(node.params)),  # one nested form, whichever the file used
        respawn=node.respawn,
        respawn_delay_s=node.respawn_delay_s,
        max_respawns=node.max_respawns,
        shutdown_timeout_s=timeout,
        required=node.required,
        respawn_reset_s=node.respawn_reset_s,
        start_timeout_s=node.start_timeout_s,
        output=node.output,
        env={
            **deadline,
            **({ENV_SIM_CLOCK: clock} if clock else {}),
            **node.env,
            **({ENV_NICE: str(node.nice)} if node.nice else {}),
            **({HOME_ENV: "1"} if ranks is not None else {}),
        },
        ranks=ranks,
    )


def learner_ranks(node: NodeConfig) -> RanksConfig | None:
    """A learner node's ranks when it has more than one (its settings were checked before any start)."""
    if node.kind != "learner":
        return None
    ranks = from_mapping(RanksConfig, unflatten(flatten(node.params)).get("ranks", {}), where=f"{node.name}: ranks")
    return ranks if ranks.distributed else None


def launches(deployment: Deployment) -> list[NodeLaunch]:
    """Every node of the deployment, in start order."""
    return [node_launch(n, deployment) for n in deployment.nodes]
