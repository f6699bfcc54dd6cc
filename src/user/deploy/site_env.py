"""What a router or node process of a deployment is given to find its site's router: endpoints, the domain, and
for a secured deployment its TLS identity and access control as a Zenoh config file (`user.security`)."""

from __future__ import annotations

from pathlib import Path

from user.bus.zenoh_config import ENV_CONFIG, ENV_DOMAIN, ENV_MODE, ENV_ROUTER
from user.deploy.deployment import Deployment
from user.deploy.sites import ROUTER_IDENTITY, Site, next_hop
from user.fleet.admission import Authorisation
from user.security.zenoh_files import Owned, access_control, tls, write

DEFAULT_WEIGHTS_TOPIC = "/policy/weights"  # a learner's `weights_topic` when its params do not set it
ROBOT_OWNED = ("transitions", "transitions/replay", "episode_events")  # under /<robot_id>/: only its robot sends


def node_env(deployment: Deployment, site: Site, node: str, zenoh_dir: Path) -> dict[str, str]:
    """A node's environment: its site's router, the domain (always set, so the caller's is not inherited), and
    when secured, its certificate and client mode (everything it sends passes the router's access control)."""
    env = {ENV_ROUTER: ",".join(site.endpoints), ENV_DOMAIN: deployment.domain}
    if deployment.security.enabled:
        identity = tls(Path(deployment.security.certs_dir), node)
        env[ENV_CONFIG] = str(write(zenoh_dir / f"{node}.json5", {"transport": {"link": {"tls": identity}}}))
        env[ENV_MODE] = "client"
    return env


def router_config(deployment: Deployment, site: Site, zenoh_dir: Path) -> str | None:
    """The Zenoh config file of `site`'s router (TLS and access control), or None for an unsecured deployment."""
    if not deployment.security.enabled:
        return None
    certs = Path(deployment.security.certs_dir)
    acl = access_control(owned_at(deployment, site.name), deployment.identities(), deployment.domain)
    config = {"transport": {"link": {"tls": tls(certs, site.identity)}}, "access_control": acl}
    return str(write(zenoh_dir / f"{site.identity}.json5", config))


def owners(deployment: Deployment) -> dict[str, str]:
    """Topic -> its only publisher: each learner's weights and its robots' episode receipts, each robot's
    transitions (live and re-sent) and episode events, and `security.owners`. So a site publishes only its own
    part of what learning rests on: no other site can forge a robot's data or the learner's answers."""
    found: dict[str, str] = {}
    for node in deployment.nodes:
        if node.kind == "learner":
            found[str(node.params.get("weights_topic", DEFAULT_WEIGHTS_TOPIC))] = node.name
            found.update({f"/{robot}/episode_acks": node.name for robot in node.params.get("robots", [])})
        elif node.kind == "robot":
            robot = node.params.get("robot_id", node.name)
            found.update({f"/{robot}/{topic}": node.name for topic in ROBOT_OWNED})
    found.update(deployment.security.owners)  # every owner is a node: checked when the deployment loads
    return found


def joining_robots(deployment: Deployment) -> dict[str, str]:
    """Robots that may join at run time in a secured deployment -> the learner that admits them: each identity of
    `security.identities` that a learner's `admit` patterns match (a robot joins under its own certificate, named
    as its robot id; one the CA never issued cannot connect at all)."""
    found: dict[str, str] = {}
    for node in deployment.nodes:
        if node.kind != "learner":
            continue
        rule = Authorisation(tuple(node.params.get("robots", [])), tuple(node.params.get("admit", [])))
        found.update({name: node.name for name in deployment.security.identities if rule.allows(name)})
    return found


def owned_at(deployment: Deployment, site: str) -> list[Owned]:
    """What `site`'s router lets only its owners send: from the owner itself, or at another site from the
    neighbouring router on the link path toward the owner's site. A robot that may join (`joining_robots`) owns its
    data too; its site is known only once it joins, so at every site its data is taken from it or from a
    neighbouring router, never from another node (another robot cannot forge it)."""
    site_of = {n.name: n.site for n in deployment.nodes}

    def toward(owner: str) -> frozenset[str]:  # the owner, and at another site the router on the path toward it
        hop = next_hop(deployment.sites, site, site_of[owner]) if deployment.sites else None
        return frozenset({owner} | ({ROUTER_IDENTITY.format(site=hop)} if hop else set()))

    named = owners(deployment)
    owned = [Owned(topic, toward(owner)) for topic, owner in sorted(named.items())]
    routers = {ROUTER_IDENTITY.format(site=other) for other in deployment.sites if other != site}
    for robot, learner in sorted(joining_robots(deployment).items()):
        for topic in ROBOT_OWNED:
            if f"/{robot}/{topic}" not in named:
                owned.append(Owned(f"/{robot}/{topic}", frozenset({robot} | routers)))
        if f"/{robot}/episode_acks" not in named:
            owned.append(Owned(f"/{robot}/episode_acks", toward(learner)))
    return owned
