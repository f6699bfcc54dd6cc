"""`user hardware list | place`: what hardware is announced, and where a deployment's groups would run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from user.bus.base import BusError
from user.cli.common import open_tool_bus, stop_on_signals
from user.config.strict import ConfigError, load_yaml
from user.hardware.descriptor import ResourceDescriptor
from user.hardware.errors import ResourcesNotFoundError
from user.hardware.registry import Pending, Registry, ResourceStatus
from user.hardware.scheduler import MissingResourceError, Placement, load_plan, place
from user.runtime.node import Node

_log = logging.getLogger("user.hardware")
EXIT_UNPLACED = 1
EXIT_ERROR = 2
COLUMNS = ("ID", "KIND", "MODEL", "SITE", "CAPACITY", "HEALTH")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("hardware", help="list announced robots, cameras and accelerators; check placements")
    hsub = p.add_subparsers(dest="hardware_command", required=True, metavar="VERB")

    ls = hsub.add_parser("list", help="resources announced on the network, with their health")
    ls.add_argument("--timeout", type=float, default=1.0, help="seconds to collect announcements (default 1)")
    ls.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ls.add_argument("--lost", action="store_true", help="also show resources lost while listening")
    ls.set_defaults(func=run_list)

    pl = hsub.add_parser("place", help="place the groups of a placement plan (YAML) on the announced hardware")
    pl.add_argument("plan", type=Path, help="YAML file with `placements: [{group: ..., needs_robot_ids: [...]}]`")
    pl.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the named resources")
    pl.add_argument("--json", action="store_true", help="print JSON instead of text")
    pl.set_defaults(func=run_place)


def _quiet_registry() -> None:
    """The registry logs each discovery at INFO for long-running nodes; a one-shot tool prints a table."""
    registry_log = logging.getLogger("user.hardware.registry")
    if registry_log.getEffectiveLevel() == logging.INFO:
        registry_log.setLevel(logging.WARNING)


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        _quiet_registry()
        try:
            return int(fn(args))
        except (BusError, ConfigError) as exc:
            _log.error("%s", exc)
            return EXIT_ERROR

    return wrapped


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def capacity(d: ResourceDescriptor) -> str:
    """The column an operator reads first: DoF and rate, frame rate, or memory and SMs."""
    if d.kind == "robot":
        text = f"{d.dof} DoF @ {d.control_rate_hz:g} Hz"
        return text + (f", cameras {', '.join(d.cameras)}" if d.cameras else "")
    if d.kind == "camera":
        return f"{d.control_rate_hz:g} fps" if d.control_rate_hz else "-"
    text = _gib(d.memory_bytes)
    return text + (f", {d.compute_units} SMs" if d.compute_units else "")


def _health(status: ResourceStatus, now: float) -> str:
    if status.health == "alive":
        return "alive"
    return f"lost {now - status.since:.0f} s ago"


def table_rows(statuses: list[ResourceStatus], pending: list[Pending], now: float) -> list[tuple[str, ...]]:
    rows = [
        (s.resource_id, s.kind, s.descriptor.model or "-", s.descriptor.site, capacity(s.descriptor), _health(s, now))
        for s in statuses
    ]
    rows += [(p.resource_id, p.kind, "?", "?", "?", "announced, no descriptor yet") for p in pending]
    return sorted(rows)


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [COLUMNS, *rows]]
    return "\n".join(lines)


def status_json(status: ResourceStatus) -> dict[str, Any]:
    d = status.descriptor
    return {
        "resource_id": d.resource_id,
        "kind": d.kind,
        "model": d.model,
        "site": d.site,
        "dof": d.dof,
        "control_rate_hz": d.control_rate_hz,
        "cameras": list(d.cameras),
        "memory_bytes": d.memory_bytes,
        "compute_units": d.compute_units,
        "properties": d.properties,
        "health": status.health,
        "since": status.since,
        "last_seen": status.last_seen,
    }


def _collect(registry: Registry, stop: threading.Event, timeout_s: float) -> None:
    """Listen for `timeout_s` (or until a signal), then give descriptors of seen tokens a moment more."""
    deadline = time.monotonic() + timeout_s
    stop.wait(timeout_s)
    if not stop.is_set():
        registry.wait_settled(max(0.0, min(1.0, deadline + 1.0 - time.monotonic())))


@_guard
def run_list(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    bus = open_tool_bus("hardware")
    registry = Registry(Node(bus))
    try:
        _collect(registry, stop, args.timeout)
        statuses = registry.resources(include_lost=args.lost)
        pending = registry.pending()
    finally:
        registry.close()
        bus.close()
    if args.json:
        out = [status_json(s) for s in statuses]
        out += [{"resource_id": p.resource_id, "kind": p.kind, "health": "pending"} for p in pending]
        print(json.dumps(out, indent=2))
    elif statuses or pending:
        print(format_table(table_rows(statuses, pending, time.time())))
    else:
        print(f"no hardware announced within {args.timeout:g} s (is a node announcing it on this router?)")
    return 0


def _named(placements: list[Placement]) -> list[str]:
    return sorted({rid for p in placements for rid in (*p.needs_robot_ids, *p.needs_camera_ids)})


def _discover_for(registry: Registry, placements: list[Placement], timeout_s: float) -> None:
    """Wait for the resources a plan names (up to the deadline), then for descriptors of tokens seen."""
    deadline = time.monotonic() + timeout_s
    named = _named(placements)
    try:
        registry.wait_for(named, timeout_s)
    except ResourcesNotFoundError as exc:
        _log.debug("%s", exc)  # the scheduler's error names what is missing
        return
    if not named:  # nothing to wait for by name: listen a short while for the rest
        threading.Event().wait(min(timeout_s, 0.5))
    registry.wait_settled(max(0.0, deadline - time.monotonic()))


@_guard
def run_place(args: argparse.Namespace) -> int:
    plan = load_plan(load_yaml(args.plan), where=str(args.plan))
    bus = open_tool_bus("hardware")
    registry = Registry(Node(bus))
    try:
        _discover_for(registry, plan.placements, args.timeout)
        resources = registry.descriptors()
    finally:
        registry.close()
        bus.close()
    try:
        assignments = place(plan.placements, resources)
        code = 0
    except MissingResourceError as exc:
        _log.error("%s", exc)
        assignments = exc.schedule.assignments
        code = EXIT_UNPLACED
    if args.json:
        print(json.dumps({g: dataclasses.asdict(a) for g, a in assignments.items()}, indent=2))
    else:
        for assignment in assignments.values():
            print(assignment.describe())
    return code
