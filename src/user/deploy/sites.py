"""Sites: where a deployment's nodes run (a lab, the cloud), each with its own Zenoh router, joined router to
router. The one placement rule lives here: per-step traffic stays inside a site, so a rollout is placed with
its robots; only what a learner needs crosses sites (transitions, weights, stats, rewards, commands).

A deployment without `sites` is one site, named "", served by its `router`; nothing changes for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from user.bus.names import is_token
from user.config.strict import ConfigError, setting

ROUTER_IDENTITY = "router.{site}"  # a site router's certificate common name
SINGLE_SITE = ""  # the name of the one site of a deployment without `sites`


@dataclass
class SiteConfig:
    """One site of a deployment: a router and the links to other sites."""

    endpoints: list[str] = setting(
        [], "where the site's router listens; the site's nodes connect to these (e.g. tcp/127.0.0.1:7447)"
    )
    link: list[str] = setting(
        [],
        "where the site's router accepts other sites' routers (e.g. tls/203.0.113.5:7448); empty: on `endpoints`",
    )
    connect: list[str] = setting([], "names of the sites whose router this site's router dials (one link each)")
    dial: list[str] = setting(
        [], "how other sites' routers reach this one when that differs from `link` (a NAT, a relay); empty: `link`"
    )
    start_timeout_s: float = setting(30.0, "how long this site's router may take to answer after its start", min=0.1)

    def link_endpoints(self) -> list[str]:
        return self.link or self.endpoints

    def dial_endpoints(self) -> list[str]:
        """Where another site's router dials this one."""
        return self.dial or self.link_endpoints()


@dataclass(frozen=True)
class Site:
    """A site as a router is started for it."""

    name: str  # "" for the one site of a deployment without `sites`
    listen: list[str]  # its nodes' endpoints, then its link endpoints
    endpoints: list[str]  # what its nodes connect to
    connect: list[str]  # the link endpoints of the sites it dials
    start_timeout_s: float

    @property
    def identity(self) -> str:
        return ROUTER_IDENTITY.format(site=self.name or "main")

    @property
    def label(self) -> str:
        """How the console names its router."""
        return f"router of site {self.name}" if self.name else "Zenoh router"


def check_sites(sites: dict[str, SiteConfig], node_sites: dict[str, str]) -> None:
    """Site names, links and node placements are consistent; raises ConfigError naming what is wrong."""
    for name, site in sites.items():
        if not is_token(name):
            raise ConfigError(f"sites: invalid site name {name!r} (letters, digits and '_')")
        if not site.endpoints:
            raise ConfigError(f"sites.{name}.endpoints: a site needs at least one endpoint")
        for other in site.connect:
            if other not in sites or other == name:
                raise ConfigError(f"sites.{name}.connect: {other!r} is not another site (known: {', '.join(sites)})")
    for node, site_name in node_sites.items():
        if sites and site_name not in sites:
            raise ConfigError(f"node {node!r}: site {site_name!r} is not one of sites ({', '.join(sites)})")
        if not sites and site_name:
            raise ConfigError(f"node {node!r}: site {site_name!r} given but the deployment has no `sites`")
    if sites and not _connected(sites):
        raise ConfigError("sites: not every site is linked to the others (through `connect`, in either direction)")


def _links(sites: dict[str, SiteConfig]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in sites}
    for name, site in sites.items():
        for other in site.connect:
            graph[name].add(other)
            graph[other].add(name)
    return graph


def _connected(sites: dict[str, SiteConfig]) -> bool:
    graph = _links(sites)
    first = next(iter(sites))
    seen = {first}
    todo = deque([first])
    while todo:
        for other in graph[todo.popleft()] - seen:
            seen.add(other)
            todo.append(other)
    return len(seen) == len(sites)


def next_hop(sites: dict[str, SiteConfig], at: str, toward: str) -> str | None:
    """The neighbour of site `at` on the shortest link path to site `toward` (None when at == toward)."""
    if at == toward:
        return None
    graph = _links(sites)
    previous: dict[str, str] = {toward: toward}
    todo = deque([toward])
    while todo:  # breadth-first from the destination: each site learns its step toward it
        here = todo.popleft()
        for other in sorted(graph[here]):
            if other not in previous:
                previous[other] = here
                todo.append(other)
    return previous.get(at)


def resolve(sites: dict[str, SiteConfig], single: list[str], single_timeout_s: float) -> list[Site]:
    """Every site's router as it is started: `single` endpoints when there are no sites."""
    if not sites:
        return [Site(SINGLE_SITE, list(single), list(single), [], single_timeout_s)]
    resolved = []
    for name, site in sites.items():
        listen = list(dict.fromkeys([*site.endpoints, *site.link]))
        connect = [endpoint for other in site.connect for endpoint in sites[other].dial_endpoints()]
        resolved.append(Site(name, listen, list(site.endpoints), connect, site.start_timeout_s))
    return resolved


PER_STEP = {"rollout": "robots", "expert": "robot_id", "teleop": "robot_id"}  # kinds in a robot's step loop, and
# the parameter naming their robot(s); these exchange observations and actions with the robot at every step


class Placed(Protocol):
    """What the placement rule reads of a node (a deployment's NodeConfig)."""

    name: str
    kind: str
    params: dict[str, Any]
    site: str


def _robots_of(node: Placed) -> list[str]:
    value = node.params.get(PER_STEP[node.kind], [])  # a per-step kind: its robot parameter
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _chunked(node: Placed) -> bool:
    """A rollout sending chunks (`send: chunks`) to robots that play them (`actions_from: chunks`): its actions
    arrive ahead of the steps they are for (real-time chunking), so it may sit at another site (a GPU in the cloud)."""
    return node.kind == "rollout" and node.params.get("send") == "chunks"


def check_chunk_pairs(nodes: Sequence[Placed]) -> None:
    """A rollout that sends chunks drives robots that play chunks, and only those; ConfigError naming each misfit."""
    robots = _robots(nodes)
    misfits = [
        f"rollout {node.name!r} sends {'chunks' if sends else 'single actions'} to robot {robot!r}, which plays "
        f"{'chunks' if plays else 'single actions'} (its actions_from)"
        for node in nodes
        if node.kind == "rollout"
        for robot in _robots_of(node)
        if robot in robots
        for sends, plays in [(_chunked(node), robots[robot].params.get("actions_from") == "chunks")]
        if sends != plays
    ]
    if misfits:
        raise ConfigError("; ".join(misfits) + ": the robot would never act; give both the same (chunks or actions)")


def _robots(nodes: Sequence[Placed]) -> dict[str, Placed]:
    return {str(n.params.get("robot_id", n.name)): n for n in nodes if n.kind == "robot"}


def check_placement(nodes: Sequence[Placed]) -> None:
    """The placement rule: a node in a robot's step loop is in the robot's site (a rollout sending chunks to robots
    that play them may be elsewhere); ConfigError naming each split."""
    robot_site = {robot: node.site for robot, node in _robots(nodes).items()}
    split = [
        f"{node.kind} {node.name!r} (site {node.site!r}) drives robot {robot!r} (site {robot_site[robot]!r})"
        for node in nodes
        if node.kind in PER_STEP and not _chunked(node)
        for robot in _robots_of(node)
        if robot in robot_site and robot_site[robot] != node.site
    ]
    if split:
        raise ConfigError(
            "; ".join(split) + ": its observations and actions would cross sites at every step. Place it in the "
            "robot's site (each site may have its own rollout), or send it chunks (rollout send: chunks, robot "
            "actions_from: chunks); only transitions, weights, stats, rewards and commands cross sites"
        )
