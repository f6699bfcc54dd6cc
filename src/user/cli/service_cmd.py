"""`user service list | call`: the services of running nodes on the Zenoh runtime (like `ros2 service`)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import yaml

from user.bus.base import BusError
from user.cli.common import call_service, open_tool_bus
from user.interfaces.codec import Codec, DecodeError, EncodeError, UnknownTypeError, default_codec
from user.interfaces.convert import MessageDataError, from_data, to_data
from user.runtime.zenoh_params import ensure_types

_log = logging.getLogger("user.service")
EXIT_ERROR = 2


class ServiceToolError(RuntimeError):
    """A `user service` command cannot do what was asked."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("service", help="list and call the services of running nodes (like ros2 service)")
    ssub = p.add_subparsers(dest="service_command", required=True, metavar="VERB")

    ls = ssub.add_parser("list", help="services announced by running nodes")
    ls.add_argument("-t", "--show-types", action="store_true")
    ls.add_argument("--timeout", type=float, default=0.5, help="seconds to collect announcements")
    ls.set_defaults(func=_guard(run_list))

    call = ssub.add_parser("call", help="call a service with a request given as YAML; print the response as YAML")
    call.add_argument("name", help="service name, e.g. /talker/get_parameters")
    call.add_argument("type", help="service type, e.g. rcl_interfaces/srv/GetParameters")
    call.add_argument("values", nargs="?", default="{}", help='the request as YAML, e.g. "{names: [rate_hz]}"')
    call.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the response (default 5)")
    call.set_defaults(func=_guard(run_call))


def _guard(fn: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (
            ServiceToolError,
            BusError,
            UnknownTypeError,
            MessageDataError,
            DecodeError,
            EncodeError,
            yaml.YAMLError,
        ) as exc:
            _log.error("%s", exc)
            return EXIT_ERROR

    return wrapped


def resolve_service_type(codec: Codec, typename: str) -> str:
    """The canonical "pkg/srv/Name" of a service type ("pkg/Name" and "pkg/srv/Name" accepted)."""
    parts = [p for p in typename.replace("::", "/").split("/") if p]
    name = f"{parts[0]}/srv/{parts[1]}" if len(parts) == 2 else "/".join(parts)
    if name.startswith("rcl_interfaces/"):
        ensure_types(codec)  # the parameter services' types
    if not (codec.has_type(f"{name}_Request") and codec.has_type(f"{name}_Response")):
        raise ServiceToolError(f"unknown service type {typename!r} (expected pkg/srv/Name, e.g. user/srv/Reset)")
    return name


def run_list(args: argparse.Namespace) -> int:
    bus = open_tool_bus("service")
    try:
        endpoints = bus.graph_endpoints(args.timeout)
    finally:
        bus.close()
    services: dict[str, set[str]] = {}
    for e in endpoints:
        if e.role == "srv":
            services.setdefault(e.name, set()).add(e.typename)
    for name, types in sorted(services.items()):
        print(f"{name} [{', '.join(sorted(types))}]" if args.show_types else name)
    return 0


def run_call(args: argparse.Namespace) -> int:
    codec = default_codec()
    srv = resolve_service_type(codec, args.type)
    data = yaml.safe_load(args.values) or {}
    if not isinstance(data, dict):
        raise ServiceToolError(f"the request must be a YAML mapping of fields, not {args.values!r}")
    request = from_data(f"{srv}_Request", data, codec)
    bus = open_tool_bus("service")
    try:
        print(f"requester: making request: {to_data(request, codec, max_array=16)}", flush=True)
        answer = call_service(bus, args.name, srv, codec.encode(request, f"{srv}_Request"), args.timeout)
    finally:
        bus.close()
    response = to_data(codec.decode(answer, f"{srv}_Response"), codec)
    print("response:")
    print(yaml.safe_dump(response, sort_keys=False, default_flow_style=False), end="")
    return 0
