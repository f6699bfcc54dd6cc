"""Helpers shared by the CLI commands."""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Callable

from user.bus.base import BusError, QoS, ServiceError, ServiceTimeoutError
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings

NO_SERVER = "no server for service"  # how ZenohBus.call_service says that no queryable answered
RETRY_S = 0.1  # `call_service`: pause between asking again


def open_tool_bus(tool: str, router_timeout_s: float = 3.0) -> ZenohBus:
    """A bus for a command-line tool; raises RouterUnreachableError with advice when no router answers."""
    return ZenohBus(f"_user_{tool}_{os.getpid()}", ZenohSettings.from_env(router_timeout_s=router_timeout_s))


def stop_on_signals() -> threading.Event:
    """An event set on SIGINT/SIGTERM."""
    event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: event.set())
    return event


def print_reports(stop: threading.Event, args: argparse.Namespace, report: Callable[[], str | None]) -> None:
    """Print `report()` every second (`topic hz`, `topic bw`) until `stop`, `args.count` reports or
    `args.timeout` seconds."""
    reports = 0
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    while not stop.wait(1.0):
        text = report()
        print(text if text else "no new messages", flush=True)
        reports += 1
        if args.count is not None and reports >= args.count:
            return
        if deadline is not None and time.monotonic() >= deadline:
            return


def add_qos_options(parser: argparse.ArgumentParser, depth: bool = True) -> None:
    """`--qos-reliability`, `--qos-durability` (and `--qos-depth`), as `ros2 topic` names them."""
    parser.add_argument(
        "--qos-reliability",
        choices=("reliable", "best_effort"),
        default="reliable",
        help="reliable: nothing dropped (default); best_effort: the latest sample wins",
    )
    parser.add_argument(
        "--qos-durability",
        choices=("volatile", "transient_local"),
        default="volatile",
        help="transient_local: late subscribers get the last --qos-depth messages (a latched topic)",
    )
    if depth:
        parser.add_argument("--qos-depth", type=int, default=10, help="history depth (default 10)")


def qos_of(args: argparse.Namespace) -> QoS:
    """The Bus QoS the `--qos-*` options ask for (the defaults where a caller's namespace has none)."""
    depth = getattr(args, "qos_depth", 10)
    if depth < 1:
        raise BusError(f"--qos-depth {depth}: must be at least 1")
    reliable = getattr(args, "qos_reliability", "reliable") == "reliable"
    latched = getattr(args, "qos_durability", "volatile") == "transient_local"
    return QoS(reliable=reliable, latched=latched, depth=depth)


def call_service(bus: ZenohBus, name: str, srv_type: str, request: bytes, timeout_s: float) -> bytes:
    """`bus.call_service`, asking again while no server is known yet (a tool's session is fresh: the router may
    not have told it about the node's queryable yet) until the deadline; then the last error is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return bus.call_service(name, srv_type, request, max(0.1, deadline - time.monotonic()))
        except ServiceTimeoutError:
            raise
        except ServiceError as exc:
            if not str(exc).startswith(NO_SERVER) or time.monotonic() + RETRY_S >= deadline:
                raise
        time.sleep(RETRY_S)
