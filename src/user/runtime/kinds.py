"""The node kinds that `user node KIND` and both launchers can start, by name, and where each one lives.

Kinds are imported lazily (by module path), so starting one node never imports the others' heavy
dependencies, and this table sits below the nodes it names: `runtime` never imports `nodes`.
"""

from __future__ import annotations

import importlib
from typing import Any

KINDS: dict[str, str] = {
    "talker": "user.nodes.demo:Talker",
    "listener": "user.nodes.demo:Listener",
    "hardware_announcer": "user.nodes.hardware:HardwareAnnouncer",
    "robot": "user.nodes.robot:RobotNode",
    "expert": "user.nodes.expert:ExpertNode",
    "teleop": "user.nodes.teleop:TeleopNode",
    "pedal": "user.nodes.pedal:PedalNode",
    "reward": "user.nodes.reward:RewardNode",
    "learner": "user.nodes.learner:LearnerNode",
    "rollout": "user.nodes.rollout:RolloutNode",
    "monitor": "user.nodes.monitor:MonitorNode",
    "bridge": "user.nodes.bridge:BridgeNode",
}


class UnknownNodeKindError(LookupError):
    """A deployment or command line names a node kind that does not exist."""


def load_kind(kind: str) -> Any:
    """The node class registered as `kind`."""
    try:
        target = KINDS[kind]
    except KeyError:
        raise UnknownNodeKindError(f"unknown node kind {kind!r} (known: {', '.join(sorted(KINDS))})") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
