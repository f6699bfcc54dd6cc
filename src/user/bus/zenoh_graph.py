"""The graph of a Zenoh deployment as its liveliness tokens describe it: who runs, publishes, subscribes and serves
what.

Every publisher, subscription and service of a `ZenohBus` announces itself with one token
`@user/graph/ROLE/TOPIC/TYPE/NODE/ID[/QOS]` (names mangled into one chunk each, see `user.bus.names`); QOS is
`reliability.durability.depth` (e.g. `reliable.volatile.10`), absent for services. Every node announces itself
with one token `@user/runtime/NODE/ZID`. This module writes the token keys and reads them back; it imports nothing
of Zenoh, so the CLI can use it on any bus's token list.
"""

from __future__ import annotations

from dataclasses import dataclass

from user.bus.base import QoS
from user.bus.names import mangle, unmangle

GRAPH_PREFIX = "@user/graph"  # liveliness tokens describing publishers and subscribers (for `topic list`)
NODE_PREFIX = "@user/runtime"  # one liveliness token per running node
ROLES = ("pub", "sub", "srv")

TopicEnds = tuple[str, set[str], set[str]]  # a topic's type, publishing node names, subscribing node names


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


def graph_token_key(role: str, topic: str, typename: str, entity: str, qos: QoS | None = None) -> str:
    """The token key announcing one endpoint; `entity`: the node's mangled name and an id unique in its session."""
    return f"{GRAPH_PREFIX}/{role}/{mangle(topic)}/{mangle(typename)}/{entity}" + (f"/{qos_chunk(qos)}" if qos else "")


def node_token_key(name: str, zid: str) -> str:
    """The token key announcing a running node (its Zenoh session id keeps two of one name apart)."""
    return f"{NODE_PREFIX}/{mangle(name)}/{zid}"


def node_name(key: str) -> str:
    """The node a node token key (outside any domain) announces."""
    return unmangle(key.split("/")[2])


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


def topic_types(endpoints: list[Endpoint]) -> dict[str, list[str]]:
    """Topic -> its types, of the publishers and subscriptions among `endpoints`, sorted."""
    found: dict[str, set[str]] = {}
    for e in endpoints:
        if e.role in ("pub", "sub"):
            found.setdefault(e.name, set()).add(e.typename)
    return {topic: sorted(types) for topic, types in sorted(found.items())}


def topic_ends(endpoints: list[Endpoint]) -> dict[str, TopicEnds]:
    """Topic -> (type, publishing node names, subscribing node names), sorted by topic."""
    found: dict[str, TopicEnds] = {}
    for e in endpoints:
        if e.role in ("pub", "sub"):
            _, pubs, subs = found.setdefault(e.name, (e.typename, set(), set()))
            (pubs if e.role == "pub" else subs).add(e.node)
    return dict(sorted(found.items()))
