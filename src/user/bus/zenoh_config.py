"""Where Zenoh sessions connect and listen, from config, environment or defaults.

Discovery follows rmw_zenoh: one router per host/site listens on a well-known endpoint, nodes connect
to it, learn about each other through it and then talk peer to peer. Multicast scouting stays off
unless asked for.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from user.bus.names import TOKEN_RULE, is_token

DEFAULT_ROUTER_ENDPOINT = "tcp/127.0.0.1:7447"
ENV_ROUTER = "USER_ZENOH_ROUTER"  # comma-separated router endpoints, e.g. "tcp/10.0.0.5:7447"
ENV_CONFIG = "USER_ZENOH_CONFIG"  # path of a Zenoh JSON5 config file applied before our settings
ENV_MULTICAST = "USER_ZENOH_MULTICAST"  # "1" turns multicast scouting on
ENV_LEASE = "USER_ZENOH_LEASE_S"  # seconds of silence after which a peer counts as gone
ENV_MODE = "USER_ZENOH_MODE"  # "client": every message through the router (a secured site); default "peer"
ENV_DOMAIN = "USER_DOMAIN"  # the deployment's domain: a key prefix, like ROS_DOMAIN_ID (empty: none)


@dataclass
class ZenohSettings:
    """How a node's Zenoh session finds the others."""

    router: list[str] = field(default_factory=lambda: [DEFAULT_ROUTER_ENDPOINT])  # endpoints to connect to
    listen: list[str] = field(default_factory=lambda: ["tcp/127.0.0.1:0"])  # where peers accept peers
    multicast_scouting: bool = False  # discover peers by UDP multicast as well (off, like rmw_zenoh)
    router_timeout_s: float = 5.0  # how long a node waits for its router before failing clearly
    config_file: str | None = None  # a Zenoh JSON5 file for everything else (TLS, auth, ...)
    lease_s: float | None = None  # declare a silent peer (hung host, cut cable) dead after this; None: Zenoh's 10 s
    mode: str = "peer"  # "peer": talk to other nodes directly once the router introduced them; "client": only
    # through the router, so that its access control sees everything (secured deployments)
    domain: str = ""  # prefix of every key this session uses ("lab_a" -> "lab_a/robot/obs"); "" = none, the
    # plain zenoh-bridge-ros2dds keys. Sessions in different domains never see each other's topics or nodes.

    def __post_init__(self) -> None:
        check_domain(self.domain)
        if self.mode not in ("peer", "client"):
            raise ValueError(f"{ENV_MODE}: mode must be peer or client, got {self.mode!r}")

    @classmethod
    def from_env(cls, **overrides: Any) -> ZenohSettings:
        """Defaults, then the USER_ZENOH_* environment variables, then explicit overrides."""
        settings = cls()
        if os.environ.get(ENV_ROUTER):
            settings.router = [e.strip() for e in os.environ[ENV_ROUTER].split(",") if e.strip()]
        if os.environ.get(ENV_CONFIG):
            settings.config_file = os.environ[ENV_CONFIG]
        if os.environ.get(ENV_LEASE):
            settings.lease_s = float(os.environ[ENV_LEASE])
        if os.environ.get(ENV_MODE):
            settings.mode = os.environ[ENV_MODE].strip()
        if os.environ.get(ENV_DOMAIN):
            settings.domain = os.environ[ENV_DOMAIN].strip()
        if os.environ.get(ENV_MULTICAST):
            settings.multicast_scouting = os.environ[ENV_MULTICAST] not in ("", "0", "false")
        for key, value in overrides.items():
            if value is not None:
                setattr(settings, key, value)
        settings.__post_init__()
        return settings


class InvalidDomainError(ValueError):
    """A domain name that cannot be a key prefix."""


def check_domain(domain: str) -> None:
    """Refuse a domain that is not one name token (so that it is exactly one chunk of every key)."""
    if domain and not is_token(domain):
        raise InvalidDomainError(f"invalid domain {domain!r} ({ENV_DOMAIN} or `domain:`): it {TOKEN_RULE}")


def session_config(
    settings: ZenohSettings, mode: str | None = None, listen: list[str] | None = None, connect: list[str] | None = None
) -> Any:
    """A `zenoh.Config` for a node (`settings.mode`), a probe (`mode="client"`) or a router (`mode="router"`,
    listening on `listen` and dialling the routers at `connect`)."""
    import zenoh

    mode = mode or settings.mode
    config = zenoh.Config.from_file(settings.config_file) if settings.config_file else zenoh.Config()
    config.insert_json5("mode", json.dumps(mode))
    if mode == "router":
        config.insert_json5("listen/endpoints", json.dumps(listen if listen is not None else settings.router))
        config.insert_json5("connect/endpoints", json.dumps(connect or []))
    elif mode == "client":
        config.insert_json5("connect/endpoints", json.dumps(settings.router))
    else:
        config.insert_json5("connect/endpoints", json.dumps(settings.router))
        config.insert_json5("listen/endpoints", json.dumps(listen if listen is not None else settings.listen))
    config.insert_json5("scouting/multicast/enabled", json.dumps(settings.multicast_scouting))
    if settings.lease_s is not None:
        # A killed process is noticed at once (its connection closes); the lease covers silent failures.
        config.insert_json5("transport/link/tx/lease", json.dumps(int(settings.lease_s * 1000)))
        config.insert_json5("transport/link/tx/keep_alive", "4")
    # Latched topics use zenoh-ext's advanced publisher cache, which orders samples by timestamp.
    config.insert_json5("timestamping/enabled", "true")
    return config
