"""`user bringup [CONFIG]`: start a whole deployment on the Zenoh runtime."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from user.config.strict import ConfigError
from user.deploy.deployment import load
from user.deploy.supervisor import Supervisor

_log = logging.getLogger("user.bringup")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bringup", help="start every node of a deployment, each in its own process")
    p.add_argument("config", nargs="?", help="deployment YAML (a path, or a name in config/; default: default)")
    p.add_argument("--log-dir", type=Path, help="where node log files go (default from the deployment)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        deployment = load(args.config)
    except ConfigError as exc:
        _log.error("%s", exc)
        return 2
    return Supervisor(deployment, args.log_dir).run()
