"""`user certs DIR [NAME ...] [--deployment FILE]`: a test CA and one certificate per identity (user.security)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from user.config.strict import ConfigError
from user.runtime.status import EXIT_CONFIG_ERROR
from user.security.certs import CertError, issue

_log = logging.getLogger("user.certs")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("certs", help="make a CA and TLS certificates for a deployment's routers and nodes")
    p.add_argument("dir", type=Path, help="where ca.pem, ca.key and NAME.pem/NAME.key go (an existing CA is reused)")
    p.add_argument("names", nargs="*", help="identities to certify (certificate common names), e.g. operator")
    p.add_argument("--deployment", help="also certify every router and node of this deployment file")
    p.add_argument("--host", action="append", default=[], help="a DNS name or IP the certificates are valid for")
    p.add_argument("--days", type=int, default=365, help="validity in days")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = list(args.names)
    try:
        if args.deployment:
            from user.deploy.deployment import load

            names += load(args.deployment).identities()
        if not names:
            raise CertError("name identities to certify, or give --deployment FILE")
        made = issue(args.dir, list(dict.fromkeys(names)), args.host, args.days)
    except (CertError, ConfigError) as exc:
        _log.error("%s", exc)
        return EXIT_CONFIG_ERROR
    _log.info("CA %s; certificates for %s", args.dir / "ca.pem", ", ".join(m.name for m in made))
    return 0
