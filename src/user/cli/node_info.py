"""`user node list` and `user node info NAME`: the running nodes, and what one publishes, subscribes and serves."""

from __future__ import annotations

import argparse
import logging

from user.bus.base import BusError
from user.bus.zenoh_graph import Endpoint
from user.cli.common import open_tool_bus

_log = logging.getLogger("user.node")
EXIT_UNKNOWN = 1  # the named node is not running
EXIT_ERROR = 2

SECTIONS = (("Subscribers", "sub"), ("Publishers", "pub"), ("Service Servers", "srv"))


def info_lines(node: str, endpoints: list[Endpoint]) -> list[str]:
    """What `ros2 node info` prints: the node's subscribers, publishers and services with their types."""
    lines = [node]
    for title, role in SECTIONS:
        lines.append(f"  {title}:")
        mine = sorted({(e.name, e.typename) for e in endpoints if e.node == node and e.role == role})
        lines += [f"    {name}: {typename}" for name, typename in mine]
    return lines


def run_list(args: argparse.Namespace) -> int:
    try:
        bus = open_tool_bus("node")
    except BusError as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    try:
        names = bus.node_names(args.timeout)
    finally:
        bus.close()
    for name in names:
        if not name.startswith("_user_"):  # the command-line tools' own sessions (this one too)
            print(name)
    return 0


def run_info(args: argparse.Namespace) -> int:
    node = args.target.lstrip("/")
    try:
        bus = open_tool_bus("node")
    except BusError as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    try:
        names = bus.node_names(args.timeout)
        endpoints = bus.graph_endpoints(args.timeout) if node in names else []
    finally:
        bus.close()
    if node not in names:
        _log.error(
            "node %s is not running (running: %s)",
            node,
            ", ".join(n for n in names if not n.startswith("_user_")) or "none",
        )
        return EXIT_UNKNOWN
    print("\n".join(info_lines(node, endpoints)))
    return 0
