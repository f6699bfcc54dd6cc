"""`user node KIND`: run one node (Zenoh runtime; with --ros-args, the rclpy runtime).

`user node list` and `user node info NAME` inspect the running nodes instead (like `ros2 node`): no node kind
is named `list` or `info` (`NODE_VERBS`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import yaml

from user.bus.zenoh_config import ZenohSettings
from user.config.describe import describe_settings
from user.config.flat import unflatten
from user.config.strict import ConfigError, load_yaml
from user.runtime.kinds import KINDS

_log = logging.getLogger("user.runtime")
NODE_VERBS = ("list", "info")  # `user node list`, `user node info NAME`; never node kinds


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "node",
        help="run one node",
        description="Run one node of KIND; or `user node list` (running nodes), `user node info NAME` (what a "
        "running node publishes, subscribes and serves).",
    )
    kind = p.add_argument("kind", nargs="?", help="node kind (see --list), or the verb list or info")
    kind.completions = [*NODE_VERBS, *sorted(KINDS)]  # read by `user completion`
    p.add_argument("target", nargs="?", metavar="NAME", help="with `info`: the running node to describe")
    p.add_argument("--name", help="node name (default: the kind)")
    p.add_argument(
        "--param",
        "-p",
        action="append",
        default=[],
        metavar="NAME:=VALUE",
        help="set a parameter (VALUE is YAML; dotted names for nested values)",
    )
    p.add_argument("--params-file", type=Path, help="YAML file of parameters")
    p.add_argument("--params-json", help="parameters as one JSON object (used by `user bringup`)")
    p.add_argument("--list", action="store_true", help="list node kinds and exit")
    p.add_argument("--describe", action="store_true", help="print the kind's parameters and exit")
    p.add_argument("--timeout", type=float, default=0.5, help="with list/info: seconds to collect announcements")
    p.set_defaults(func=run)


def parse_params(args: argparse.Namespace) -> dict[str, Any]:
    """Merge parameters: file, then JSON, then -p NAME:=VALUE (later wins)."""
    params: dict[str, Any] = {}
    if args.params_file:
        data = load_yaml(args.params_file) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{args.params_file}: expected a mapping of parameters")
        params.update(data)
    if args.params_json:
        params.update(json.loads(args.params_json))
    flat: dict[str, Any] = {}
    for item in args.param:
        name, sep, value = item.partition(":=")
        if not sep:
            name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--param {item!r}: expected NAME:=VALUE")
        flat[name] = yaml.safe_load(value)
    _merge(params, unflatten(flat))
    return params


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def run(args: argparse.Namespace) -> int:
    from user.runtime.kinds import load_kind
    from user.runtime.priority import apply_niceness_from_env
    from user.runtime.runner import EXIT_STARTUP_FAILED, run_node

    if args.kind in NODE_VERBS:
        return _inspect(args)
    if args.target is not None:
        _log.error(
            "unexpected argument %r after node kind %s (only `user node info NAME` takes one)", args.target, args.kind
        )
        return EXIT_STARTUP_FAILED
    if args.list or not args.kind:
        for kind, target in sorted(KINDS.items()):
            print(f"{kind:20s} {target}")
        return 0 if args.list else EXIT_STARTUP_FAILED
    if args.describe:
        spec = getattr(load_kind(args.kind), "Params", None)
        for name, tp, default, doc in describe_settings(spec) if spec else []:
            print(f"{name} ({tp}, default {default!r}): {doc}")
        return 0
    try:
        params = parse_params(args)
    except (ConfigError, json.JSONDecodeError, yaml.YAMLError) as exc:
        _log.error("%s", exc)
        return EXIT_STARTUP_FAILED
    apply_niceness_from_env()
    name = args.name or args.kind
    if args.kind == "learner":
        from user.distributed.group import end_process
        from user.nodes.learner_ranks import run_learner_rank, started_by_torchrun

        if started_by_torchrun():  # one of several learner ranks: only the lead runs the node on the Bus
            lead = lambda: run_node(args.kind, name, params, ZenohSettings.from_env())  # noqa: E731 - deferred
            end_process(run_learner_rank(name, params, lead))
    return run_node(args.kind, name, params, ZenohSettings.from_env())


def _inspect(args: argparse.Namespace) -> int:
    """`user node list` / `user node info NAME`."""
    from user.cli.node_info import EXIT_ERROR, run_info, run_list

    if args.kind == "list":
        return run_list(args)
    if args.target is None:
        _log.error("user node info: name the node, e.g. `user node info talker` (see `user node list`)")
        return EXIT_ERROR
    return run_info(args)
