"""The deployment YAML: which nodes exist, with which parameters, and how they are supervised.

`user bringup` (Zenoh runtime) and `launch/bringup.launch.py` (ROS 2) both read it through `load`, so
the two launchers cannot disagree. Unknown keys are errors naming the key and the file.

Supervision (the same rules on both launchers, `user.deploy.respawn`): a node that exits with a configuration
error (exit code 2) or that finished (exit code 0) is never respawned; others are respawned when `respawn` is
set, up to `max_respawns` times, the count starting again after the node ran `respawn_reset_s` without exiting.
A `required` node (the default) that is gone for good stops the whole deployment, which then exits non-zero; an
optional one (`required: false`) is reported and the rest runs on. A node must report running within its
`start_timeout_s`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from user.bus.zenoh_config import DEFAULT_ROUTER_ENDPOINT, InvalidDomainError, check_domain
from user.config.strict import ConfigError, from_mapping, load_yaml, setting
from user.deploy.sites import Site, SiteConfig, check_chunk_pairs, check_placement, check_sites
from user.deploy.sites import resolve as resolve_sites
from user.interfaces.idl import candidate_dirs
from user.runtime.kinds import KINDS
from user.runtime.priority import MAX_NICE
from user.security.zenoh_files import SecurityConfig

_log = logging.getLogger(__name__)

CONFIG_DIR = next(  # config/ of a source checkout, else of the install (<prefix>/share/user/config)
    (d / "config" for d in candidate_dirs() if (d / "config").is_dir()),
    Path(__file__).resolve().parents[3] / "config",
)
DEFAULT_CONFIG = "default.yaml"


@dataclass
class RouterConfig:
    """The Zenoh router of the deployment (Zenoh runtime only; ROS 2 sites use DDS)."""

    endpoints: list[str] = field(default_factory=lambda: [DEFAULT_ROUTER_ENDPOINT])  # where it listens
    start: Literal["auto", "always", "never"] = "auto"  # auto: start one unless one already answers
    start_timeout_s: float = setting(
        30.0, "how long a router `user bringup` started may take to answer (a loaded machine needs more)", min=0.1
    )


@dataclass
class NodeConfig:
    """One node process."""

    name: str  # unique node name (also its log file name)
    kind: str  # node kind, see `user node --list`
    params: dict[str, Any] = field(default_factory=dict)  # the node's parameters, checked by the node
    respawn: bool = False  # restart the process when it fails (a clean exit, code 0, is a finish: not restarted)
    respawn_delay_s: float = 1.0  # wait before restarting
    output: Literal["log", "screen"] = "log"  # screen: also echo the node's output on the bringup console
    shutdown_timeout_s: float | None = None  # SIGINT -> SIGTERM allowance; None = the deployment's (a learner
    # saving a large checkpoint needs more)
    max_respawns: int = 5  # give up after this many restarts (-1: never give up)
    env: dict[str, str] = field(default_factory=dict)  # extra environment variables for the process
    nice: int = 0  # run the process at this niceness (0..19, lower priority): a learner sharing a machine with robots
    required: bool = setting(
        True,
        "the deployment cannot run without this node: when it is gone for good (a configuration error, "
        "respawns used up, or a failure without respawn) the whole deployment stops and exits non-zero",
    )
    respawn_reset_s: float = setting(
        60.0, "after running this long without exiting, the node's respawn count starts again from 0", min=0.1
    )
    site: str = setting("", "the site this node runs in (one of the deployment's `sites`; empty without sites)")
    start_timeout_s: float = setting(
        120.0,
        "the node must report running within this many seconds of its start, else it is stopped and counts "
        "as failed (a learner loading a large buffer or model needs more)",
        min=0.1,
    )

    def __post_init__(self) -> None:
        if not 0 <= self.nice <= MAX_NICE:
            raise ConfigError(
                f"node {self.name!r}: nice must be in 0..{MAX_NICE} (only lowering is allowed), got {self.nice}"
            )
        if self.kind not in KINDS:
            raise ConfigError(f"unknown node kind {self.kind!r} (known: {', '.join(sorted(KINDS))})")
        if not self.name or "/" in self.name:
            raise ConfigError(f"invalid node name {self.name!r}")


@dataclass
class Deployment:
    """Everything `user bringup` starts."""

    name: str  # deployment name, used for the run/log directory
    nodes: list[NodeConfig]  # started in this order, stopped in reverse
    router: RouterConfig = field(default_factory=RouterConfig)
    domain: str = setting(
        "",
        "key prefix of every topic, service and node of this deployment on Zenoh, like ROS_DOMAIN_ID: deployments "
        "with different domains share a router without seeing each other (empty: no prefix)",
    )
    log_dir: str = "{run_dir}/logs"  # per-node log files; {run_dir}, {name} are filled in (user.deploy.run_dir)
    shutdown_timeout_s: float = 5.0  # per node: SIGINT, then SIGTERM, then SIGKILL after this
    sites: dict[str, SiteConfig] = setting(
        {}, "where nodes run (a lab, the cloud): a router each, joined router to router; empty: one site, `router`"
    )
    security: SecurityConfig = field(default_factory=SecurityConfig)  # TLS, identities and access control
    placement: Literal["enforce", "warn"] = setting(
        "enforce", "a robot's step loop split across sites: refused (enforce), or only logged (warn: benchmarks)"
    )

    def __post_init__(self) -> None:
        try:
            check_domain(self.domain)
        except InvalidDomainError as exc:
            raise ConfigError(str(exc)) from exc
        seen: set[str] = set()
        for node in self.nodes:
            if node.name in seen:
                raise ConfigError(f"node name {node.name!r} is used twice")
            seen.add(node.name)
        check_sites(self.sites, {node.name: node.site for node in self.nodes})
        check_chunk_pairs(self.nodes)
        try:
            check_placement(self.nodes)
        except ConfigError as exc:
            if self.placement == "enforce":
                raise
            _log.warning("%s", exc)
        if self.security.enabled:
            plain = [e for site in self.routers() for e in site.listen if not e.startswith("tls/")]
            if plain:
                raise ConfigError(
                    f"security.certs_dir is set but these router endpoints are not tls/: {', '.join(plain)}"
                )
            unknown = {t: o for t, o in self.security.owners.items() if o not in seen}
            if unknown:
                topic, owner = next(iter(unknown.items()))
                raise ConfigError(f"security.owners: {topic!r} is owned by {owner!r}, which is not a node")

    def routers(self) -> list[Site]:
        """Every site's router as it is started (one for a deployment without sites)."""
        return resolve_sites(self.sites, self.router.endpoints, self.router.start_timeout_s)

    def identities(self) -> list[str]:
        """Every certificate name of the deployment: its routers' and its nodes' (`user certs --deployment`)."""
        return [*(site.identity for site in self.routers()), *(n.name for n in self.nodes), *self.security.identities]


def resolve_path(config: str | Path | None, search_dirs: list[str | Path] | None = None) -> Path:
    """A config argument as a path: an existing file, or a name inside config/ (or `search_dirs`)."""
    dirs = [Path(d) for d in (search_dirs or [])] + [CONFIG_DIR]
    path = Path(config) if config is not None else Path(DEFAULT_CONFIG)
    if config is not None and path.exists():
        return path
    for directory in dirs:
        for candidate in (directory / path, directory / f"{path}.yaml"):
            if candidate.is_file():
                return candidate
    names = sorted({f.stem for d in dirs if d.is_dir() for f in d.glob("*.yaml")})
    raise ConfigError(
        f"{path}: no such deployment file, nor a deployment of that name in {', '.join(map(str, dirs))}; "
        f"the names there: {', '.join(names) or 'none'} (a path to a deployment YAML works too)"
    )


def load(config: str | Path | None = None, search_dirs: list[str | Path] | None = None) -> Deployment:
    """Read and check a deployment file."""
    path = resolve_path(config, search_dirs)
    return from_mapping(Deployment, load_yaml(path), where=str(path))
