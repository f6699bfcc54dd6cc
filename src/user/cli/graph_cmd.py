"""`user graph [--deployment FILE]`: every topic of the running nodes, who publishes and who subscribes, its
measured rate and bandwidth, and with a deployment of several sites, which link each topic crosses (publisher's
site -> subscriber's site). Per-step topics should stay within their site (`user.deploy.sites`)."""

from __future__ import annotations

import argparse
import logging
import threading
import time
from dataclasses import dataclass, field

from user.cli.common import open_tool_bus

_log = logging.getLogger("user.graph")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("graph", help="topics with their publishers, subscribers, rates and the links they cross")
    p.add_argument("--deployment", help="deployment file: place the nodes in its sites to show the links crossed")
    p.add_argument("--window", type=float, default=3.0, help="seconds to measure every topic's rate")
    p.set_defaults(func=run)


@dataclass
class Meter:
    """Messages and bytes of one topic over the window."""

    messages: int = 0
    size: int = 0  # bytes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, payload: bytes) -> None:
        with self.lock:
            self.messages += 1
            self.size += len(payload)


def links(publishers: set[str], subscribers: set[str], site_of: dict[str, str]) -> str:
    """'lab_a -> cloud, ...' for the site pairs a topic crosses; 'within lab_a' when it stays; '?' unknown."""
    if not site_of:
        return ""
    pairs = sorted({(site_of.get(p, "?"), site_of.get(s, "?")) for p in publishers for s in subscribers})
    crossing = [f"{a} -> {b}" for a, b in pairs if a != b]
    if crossing:
        return ", ".join(crossing)
    sites = sorted({site_of.get(n, "?") for n in publishers | subscribers})
    return f"within {', '.join(sites)}"


def run(args: argparse.Namespace) -> int:
    site_of: dict[str, str] = {}
    if args.deployment:
        from user.config.strict import ConfigError
        from user.deploy.deployment import load

        try:
            deployment = load(args.deployment)
        except ConfigError as exc:
            _log.error("%s", exc)
            return 2
        site_of = {node.name: node.site or "(one site)" for node in deployment.nodes}
    bus = open_tool_bus("graph")
    try:
        endpoints = bus.topic_endpoints(1.0)
        meters = {topic: Meter() for topic in endpoints}
        for topic, (typename, _, _) in endpoints.items():
            bus.create_subscription(topic, typename, meters[topic])
        time.sleep(args.window)
    finally:
        bus.close()
    rows = [("topic", "type", "publishers", "subscribers", "Hz", "kB/s", "crosses" if site_of else "")]
    for topic, (typename, pubs, subs) in endpoints.items():
        meter = meters[topic]
        rows.append(
            (
                topic,
                typename,
                ",".join(sorted(pubs)) or "-",
                ",".join(sorted(subs)) or "-",
                f"{meter.messages / args.window:.1f}",
                f"{meter.size / args.window / 1e3:.1f}",
                links(pubs, subs, site_of),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0
