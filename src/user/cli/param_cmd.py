"""`user param list | get | set`: a running node's parameters on the Zenoh runtime (like `ros2 param`).

Talks to the node's parameter services (`user.runtime.zenoh_params`: rcl_interfaces' ListParameters, GetParameters,
SetParameters). A refused change prints the node's reason and exits 1.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

import yaml

from user.bus.base import BusError
from user.cli.common import call_service, open_tool_bus
from user.interfaces.codec import default_codec
from user.interfaces.convert import from_data, to_data
from user.runtime.zenoh_params import GET, LIST, SET, ensure_types, infer_type, service_name, to_value_data, value_of

_log = logging.getLogger("user.param")
EXIT_REFUSED = 1  # the node refused the change, or has no such parameter
EXIT_ERROR = 2  # no router, no such node, no answer


class ParamToolError(RuntimeError):
    """A `user param` command cannot do what was asked."""


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("param", help="list, get and set a running node's parameters (like ros2 param)")
    psub = p.add_subparsers(dest="param_command", required=True, metavar="VERB")

    ls = psub.add_parser("list", help="the node's parameters by dotted name")
    ls.add_argument("node")
    ls.add_argument("--prefix", action="append", default=[], help="only parameters under this dotted prefix")
    ls.set_defaults(func=_guard(run_list))

    get = psub.add_parser("get", help="a parameter's current value (YAML)")
    get.add_argument("node")
    get.add_argument("name", help="dotted name, e.g. rate_hz or learning.sac.gamma")
    get.set_defaults(func=_guard(run_get))

    put = psub.add_parser("set", help="change a parameter while the node runs (settings marked live)")
    put.add_argument("node")
    put.add_argument("name", help="dotted name")
    put.add_argument("value", help="the new value as YAML, e.g. 5.0, true, '[1, 2]'")
    put.set_defaults(func=_guard(run_set))

    for verb in (ls, get, put):
        verb.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the node's answer")


def _guard(fn: Any) -> Any:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return int(fn(args))
        except (ParamToolError, BusError, yaml.YAMLError) as exc:
            _log.error("%s", exc)
            return EXIT_ERROR

    return wrapped


def call(node: str, srv: str, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Call parameter service `srv` of `node` with `request` (data); its response as data."""
    codec = default_codec()
    ensure_types(codec)
    name = service_name(node, srv)
    payload = codec.encode(from_data(f"{srv}_Request", request, codec), f"{srv}_Request")
    bus = open_tool_bus("param")
    try:
        answer = call_service(bus, name, srv, payload, timeout_s)
    except BusError as exc:
        raise ParamToolError(f"node {node} did not answer ({exc}); is it running? (`user node list`)") from None
    finally:
        bus.close()
    return to_data(codec.decode(answer, f"{srv}_Response"), codec)


def run_list(args: argparse.Namespace) -> int:
    result = call(args.node, LIST, {"prefixes": args.prefix}, args.timeout)["result"]
    for name in result["names"]:
        print(f"  {name}")
    return 0


def run_get(args: argparse.Namespace) -> int:
    (value,) = call(args.node, GET, {"names": [args.name]}, args.timeout)["values"]
    if value["type"] == 0:
        _log.error("node %s has no parameter %s (see `user param list %s`)", args.node, args.name, args.node)
        return EXIT_REFUSED
    print(yaml.safe_dump(value_of(value), default_flow_style=True).removesuffix("\n...\n").strip())
    return 0


def run_set(args: argparse.Namespace) -> int:
    value = yaml.safe_load(args.value)
    tp = infer_type(value)
    if tp == 0:  # a mapping or a mixed list: a YAML parameter takes its text
        value, tp = args.value, 4
    parameter = {"name": args.name, "value": to_value_data(value, tp)}
    results = call(args.node, SET, {"parameters": [parameter]}, args.timeout)["results"]
    refused = [r["reason"] for r in results if not r["successful"]]
    if refused:
        print(f"Setting parameter failed: {refused[0]}")
        return EXIT_REFUSED
    print("Set parameter successful")
    return 0
