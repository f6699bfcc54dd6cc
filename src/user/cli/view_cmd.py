"""`user view`: a Foxglove WebSocket server (foxglove-sdk) serving a running deployment's topics, ROS 2 schemas
and CDR bytes as they are, on the Zenoh runtime. Open the printed ws:// URL in Foxglove ("Open connection" ->
"Foxglove WebSocket"); config/foxglove_layout.json is a layout to import there."""

from __future__ import annotations

import argparse
import logging
import os

from user.bus.base import BusError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import DEFAULT_ROUTER_ENDPOINT, ENV_DOMAIN, ENV_ROUTER, InvalidDomainError, ZenohSettings
from user.cli.common import stop_on_signals
from user.config.strict import ConfigError, from_mapping
from user.viewer import LiveViewer, ViewerError, ViewerSettings
from user.viewer.settings import DEFAULT_HOST, DEFAULT_PORT

_log = logging.getLogger("user.view")
ROUTER_TIMEOUT_S = 3.0
EXIT_ERROR = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("view", help="serve a running deployment's topics to Foxglove over a WebSocket")
    p.add_argument(
        "--router",
        action="append",
        default=[],
        metavar="ENDPOINT",
        help=f"Zenoh router (repeatable; default: {ENV_ROUTER}, else {DEFAULT_ROUTER_ENDPOINT})",
    )
    p.add_argument("--domain", default="", help=f"the deployment's domain (default: {ENV_DOMAIN})")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to serve on (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port to serve on (default {DEFAULT_PORT}; 0: any)")
    p.add_argument(
        "--topics", default="", help="comma-separated topics or patterns to serve, e.g. '/franka_left/*' (default: all)"
    )
    p.add_argument("--rediscover", type=float, default=2.0, metavar="SECONDS", help="look for new topics this often")
    p.set_defaults(func=run)


def viewer_settings(args: argparse.Namespace) -> ViewerSettings:
    """The options as settings, checked like any configuration (`ConfigError` names the option)."""
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    values = {"host": args.host, "port": args.port, "topics": topics, "rediscover_period_s": args.rediscover}
    return from_mapping(ViewerSettings, values, where="user view")


def run(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    try:
        settings = viewer_settings(args)
        zenoh = ZenohSettings.from_env(
            router=args.router or None, domain=args.domain or None, router_timeout_s=ROUTER_TIMEOUT_S
        )
        bus = ZenohBus(f"_user_view_{os.getpid()}", zenoh)
    except (ConfigError, InvalidDomainError, BusError) as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    viewer = LiveViewer(bus, settings)
    try:
        viewer.start()
        print(f"Foxglove: open {viewer.url} (Open connection -> Foxglove WebSocket)", flush=True)
        print(f"serving {len(viewer.topics())} topics; new ones are picked up as they appear", flush=True)
        while not stop.wait(1.0):
            pass
    except ViewerError as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    finally:
        viewer.stop()
        bus.close()
    return 0
