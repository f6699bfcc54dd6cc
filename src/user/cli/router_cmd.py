"""`user router`: a Zenoh router (a Python session in router mode)."""

from __future__ import annotations

import argparse
import logging

from user.bus.router import serve
from user.bus.zenoh_config import DEFAULT_ROUTER_ENDPOINT, ZenohSettings
from user.cli.common import stop_on_signals

_log = logging.getLogger("user.router")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("router", help="run a Zenoh router (nodes connect to it to find each other)")
    p.add_argument(
        "--listen",
        action="append",
        metavar="ENDPOINT",
        help=f"endpoint to listen on (repeatable; default {DEFAULT_ROUTER_ENDPOINT})",
    )
    p.add_argument(
        "--connect",
        action="append",
        metavar="ENDPOINT",
        help="another site's router to link to (repeatable); TLS and access control from USER_ZENOH_CONFIG",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    try:
        serve(args.listen or [DEFAULT_ROUTER_ENDPOINT], stop, ZenohSettings.from_env(), args.connect)
    except OSError as exc:
        _log.error("%s", exc)
        return 2
    return 0
