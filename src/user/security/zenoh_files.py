"""The Zenoh configuration of a secured deployment, written as JSON5 files the processes load
(`USER_ZENOH_CONFIG`): TLS with mutual authentication on every link, and each router's access control.

Every router and node has its own certificate (`user certs --deployment`), its common name the router's
`router.<site>` or the node's name. Nodes run as Zenoh clients, so everything they send passes their site's
router, and the router refuses what the sender may not publish: an owned topic (each learner's weights, and
`security.owners`) is accepted only from its owner node and, at other sites, from the neighbouring router on
the link path toward the owner's site. A peer without a certificate signed by the deployment's CA cannot
connect at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from user.bus.names import in_domain, topic_to_key
from user.config.strict import ConfigError, setting
from user.security.certs import CA_CERT, identity

OWNED_MESSAGES = ["put", "delete"]  # what only a topic's owner may send on its key
CACHE_MESSAGES = ["declare_queryable", "reply"]  # ... and on its latched cache (late joiners' history)


@dataclass
class SecurityConfig:
    """TLS, identities and access control of a deployment's Zenoh links (off while `certs_dir` is empty)."""

    certs_dir: str = setting(
        "",
        "directory of `user certs --deployment`: when set, every link uses TLS with mutual authentication, nodes "
        "connect as clients of their site's router, and routers refuse owned topics from anyone but their owner",
    )
    owners: dict[str, str] = setting({}, "topic -> the only node that may publish it (each learner owns its weights)")
    identities: list[str] = setting(
        [], "other certificate names the CA issued (an operator's CLI): they are refused owned topics too"
    )

    @property
    def enabled(self) -> bool:
        return bool(self.certs_dir)


@dataclass(frozen=True)
class Owned:
    """A topic only some identities may publish: its owner node, and the router on the path toward it."""

    topic: str
    allowed: frozenset[str]  # certificate names that may send on it through this router


def tls(certs_dir: Path, name: str) -> dict[str, Any]:
    """The `transport/link/tls` block of identity `name`: its certificate both ways, the CA, mTLS on."""
    me = identity(certs_dir, name)
    for path in (certs_dir / CA_CERT, me.cert, me.key):
        if not path.is_file():
            raise ConfigError(f"security.certs_dir: {path} is missing; make it with `user certs --deployment FILE`")
    return {
        "root_ca_certificate": str(certs_dir / CA_CERT),
        "listen_certificate": str(me.cert),
        "listen_private_key": str(me.key),
        "connect_certificate": str(me.cert),
        "connect_private_key": str(me.key),
        "enable_mtls": True,
    }


def access_control(owned: list[Owned], everyone: list[str], domain: str) -> dict[str, Any]:
    """A router's ACL: for each owned topic, deny its messages (and its latched cache's) from every identity
    of `everyone` that is not allowed."""
    rules, subjects, policies = [], [], []
    for k, item in enumerate(owned):
        key = in_domain(domain, topic_to_key(item.topic))
        rules.append(
            {
                "id": f"owned_{k}",
                "permission": "deny",
                "flows": ["ingress"],
                "messages": OWNED_MESSAGES,
                "key_exprs": [key],
            }
        )
        rules.append(
            {
                "id": f"owned_cache_{k}",
                "permission": "deny",
                "flows": ["ingress"],
                "messages": CACHE_MESSAGES,
                "key_exprs": [f"{key}/@adv/**"],
            }
        )
        subjects.append({"id": f"not_owner_{k}", "cert_common_names": sorted(set(everyone) - item.allowed)})
        policies.append(
            {"id": f"policy_{k}", "rules": [f"owned_{k}", f"owned_cache_{k}"], "subjects": [f"not_owner_{k}"]}
        )
    return {
        "enabled": bool(rules),
        "default_permission": "allow",
        "rules": rules,
        "subjects": subjects,
        "policies": policies,
    }


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=1))
    return path
