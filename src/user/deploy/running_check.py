"""One deployment per run: before `user bringup` starts anything, no node of the deployment's names may be alive in
its domain on the routers it would use.

Otherwise a second bringup joins the first: a second learner, rollout and robots under the same names on the same
topics, each learner storing the other run's episodes and each monitor printing the other's stats. A run beside a
running one takes a domain of its own (`user bringup --domain NAME`, or `domain:` in the deployment file) or a router
of its own (`router.endpoints`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from user.bus.presence import PresenceProbeError, live_nodes
from user.bus.router import router_reachable
from user.deploy.deployment import Deployment
from user.deploy.site_env import router_config
from user.deploy.sites import Site

ROUTER_PROBE_S = 0.5  # one reachability probe of a site's router
SHOWN_NAMES = 6  # the refusal names this many of the live nodes, then a count


class DeploymentRunningError(RuntimeError):
    """Nodes of the deployment's names are alive in its domain: another run of it is going on."""


def check_not_running(deployment: Deployment, sites: list[Site]) -> None:
    """Raise DeploymentRunningError when a router of `sites` that already answers knows a live node named as one of
    the deployment's (a site whose router is not running has no nodes to find)."""
    names = {node.name for node in deployment.nodes}
    with tempfile.TemporaryDirectory(prefix="user-probe-") as tmp:
        for site in sites:
            config_file = router_config(deployment, site, Path(tmp))
            if not router_reachable(site.endpoints, ROUTER_PROBE_S, config_file):
                continue
            try:
                clash = sorted(names.intersection(live_nodes(site.endpoints, deployment.domain, config_file)))
            except PresenceProbeError:
                continue  # the router went away between the two probes: nothing of ours runs through it
            if clash:
                raise DeploymentRunningError(refusal(deployment, site, clash))


def refusal(deployment: Deployment, site: Site, clash: list[str]) -> str:
    """The one line that says which nodes run already, where, and how to run a second deployment beside them."""
    more = len(clash) - SHOWN_NAMES
    shown = ", ".join(clash[:SHOWN_NAMES]) + (f" and {more} more" if more > 0 else "")
    domain = f"domain {deployment.domain!r}" if deployment.domain else "the default domain (no `domain:`)"
    return (
        f"{deployment.name} is already running: {shown} {'is' if len(clash) == 1 else 'are'} alive in {domain} on "
        f"the Zenoh router at {', '.join(site.endpoints)}. Stop that run first (Ctrl-C in its console), or start "
        f"this one beside it in a domain of its own: `user bringup {deployment.name} --domain NAME` "
        "(or `domain:` in the deployment file, or a router of its own with `router.endpoints`)"
    )
