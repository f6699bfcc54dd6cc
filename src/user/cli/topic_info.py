"""`user topic info` and `user topic bw`: who is on a topic, and how many bytes per second it carries."""

from __future__ import annotations

import argparse
import threading
import time
from collections import deque

from user.bus.zenoh_graph import Endpoint, describe_qos
from user.cli.common import open_tool_bus, print_reports, qos_of, stop_on_signals


class UnknownTopicError(RuntimeError):
    """No running node announces the topic."""


def info_lines(topic: str, endpoints: list[Endpoint], verbose: bool) -> list[str]:
    """What `ros2 topic info [-v]` prints for `topic`, with the node names of its publishers and subscribers."""
    mine = [e for e in endpoints if e.name == topic and e.role in ("pub", "sub")]
    if not mine:
        raise UnknownTopicError(f"unknown topic {topic}: no running node publishes or subscribes to it")
    pubs = [e for e in mine if e.role == "pub"]
    subs = [e for e in mine if e.role == "sub"]
    types = sorted({e.typename for e in pubs} or {e.typename for e in subs})
    lines = [
        f"Type: {', '.join(types)}",
        f"Publisher count: {len(pubs)}",
        f"Subscription count: {len(subs)}",
        f"Publishers: {', '.join(sorted({e.node for e in pubs})) or '-'}",
        f"Subscribers: {', '.join(sorted({e.node for e in subs})) or '-'}",
    ]
    if verbose:
        for e in sorted(pubs, key=lambda e: e.node) + sorted(subs, key=lambda e: e.node):
            lines += ["", f"Node name: {e.node}", f"Topic type: {e.typename}"]
            lines.append(f"Endpoint type: {'PUBLISHER' if e.role == 'pub' else 'SUBSCRIPTION'}")
            lines += ["QoS profile:", *(f"  {line}" for line in describe_qos(e.qos))]
    return lines


def run_info(args: argparse.Namespace) -> int:
    bus = open_tool_bus("topic")
    try:
        endpoints = bus.graph_endpoints(args.timeout)
    finally:
        bus.close()
    try:
        lines = info_lines(args.topic, endpoints, args.verbose)
    except UnknownTopicError as exc:
        from user.cli.topic_cmd import TopicToolError

        raise TopicToolError(str(exc)) from None
    print("\n".join(lines))
    return 0


def size_text(size: float) -> str:
    """Bytes as `ros2 topic bw` writes them (B, KB, MB: powers of 1000)."""
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{size:.0f} B"


class BandwidthMeter:
    """Message sizes and arrival times over the last `window` messages."""

    def __init__(self, window: int) -> None:
        self.samples: deque[tuple[float, int]] = deque(maxlen=window)
        self.lock = threading.Lock()

    def add(self, now: float, size: int) -> None:
        with self.lock:
            self.samples.append((now, size))

    def report(self, now: float) -> str | None:
        """'12.34 KB/s from 10 messages' and the size statistics; None before the first message."""
        with self.lock:
            samples = list(self.samples)
        if not samples:
            return None
        sizes = [size for _, size in samples]
        span = now - samples[0][0]
        rate = sum(sizes) / span if span > 0 else 0.0
        return (
            f"{size_text(rate)}/s from {len(sizes)} messages\n\tMessage size mean: {size_text(sum(sizes) / len(sizes))}"
            f" min: {size_text(min(sizes))} max: {size_text(max(sizes))}"
        )


def run_bw(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    qos = qos_of(args)
    meter = BandwidthMeter(args.window)
    bus = open_tool_bus("topic")
    try:
        bus.create_subscription(args.topic, "unknown", lambda payload: meter.add(time.monotonic(), len(payload)), qos)
        print(f"Subscribed to [{args.topic}]", flush=True)
        print_reports(stop, args, lambda: meter.report(time.monotonic()))
    finally:
        bus.close()
    return 0
