"""The graph of a Zenoh deployment as its liveliness tokens describe it: who publishes, subscribes and serves what.

Every publisher, subscription and service of a `ZenohBus` announces itself with one token
`@user/graph/ROLE/TOPIC/TYPE/NODE/ID[/QOS]` (names mangled into one chunk each, see `user.bus.names`); QOS is
`reliability.durability.depth` (e.g. `reliable.volatile.10`), absent for services. This module writes the QOS
chunk and reads the tokens back; it imports nothing of Zenoh, so the CLI can use it on any bus's token list.
"""

from __future__ import annotations

from dataclasses import dataclass

from user.bus.base import QoS
from user.bus.names import unmangle

ROLES = ("pub", "sub", "srv")


@dataclass(frozen=True)
class Endpoint:
    """One publisher, subscription or service, as announced."""

    role: str  # "pub", "sub" or "srv"
    name: str  # topic or service name, e.g. "/chatter"
    typename: str  # "pkg/msg/Type" (topics) or "pkg/srv/Type" (services)
    node: str  # the announcing node's name
    qos: str = ""  # the QOS chunk ("reliable.volatile.10"); "" when not announced


def qos_chunk(qos: QoS) -> str:
    """The QOS chunk of a graph token: reliability, durability and depth, as `ros2 topic info -v` names them."""
    reliability = "reliable" if qos.reliable else "best_effort"
    durability = "transient_local" if qos.latched else "volatile"
    return f"{reliability}.{durability}.{qos.depth}"


def describe_qos(chunk: str) -> list[str]:
    """The QOS chunk as `ros2 topic info -v` lines ('Reliability: RELIABLE', ...); 'QoS: unknown' if absent."""
    parts = chunk.split(".")
    if len(parts) != 3:
        return ["QoS profile: unknown (not announced)"]
    reliability, durability, depth = parts
    return [
        f"Reliability: {reliability.upper()}",
        f"History (Depth): KEEP_LAST ({depth})",
        f"Durability: {durability.upper()}",
    ]


def parse_token(key: str) -> Endpoint | None:
    """The endpoint a graph token key (outside any domain) announces; None for any other key."""
    parts = key.split("/")  # @user / graph / role / topic / type / node / id [/ qos]
    if len(parts) < 7 or parts[2] not in ROLES:
        return None
    qos = parts[7] if len(parts) > 7 else ""
    return Endpoint(parts[2], unmangle(parts[3]), unmangle(parts[4]), unmangle(parts[5]), qos)
