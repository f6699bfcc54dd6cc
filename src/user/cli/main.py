"""`user`: run and inspect a deployment (bringup, node, router, topic, param, service, hardware), its buffer and
reward model."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NamedTuple

from user import __version__
from user.runtime.logs import setup_logging


class Command(NamedTuple):
    """Where a command lives, and its line in `user --help`."""

    module: str  # adds the command's parser (`add_parser(sub)`) and runs it; imported only when the command runs
    help: str  # the same line the module's parser gives (test/cli/test_startup.py holds them equal)


# The commands, in `user --help` order. Only the module of the command that runs is imported, so `user --help`,
# `user router` and `user topic` start without the learning stack (torch) that `user train-reward` needs.
COMMANDS: dict[str, Command] = {
    "bringup": Command("user.cli.bringup_cmd", "start every node of a deployment, each in its own process"),
    "node": Command("user.cli.node_cmd", "run one node"),
    "router": Command("user.cli.router_cmd", "run a Zenoh router (nodes connect to it to find each other)"),
    "bridge": Command("user.cli.bridge_cmd", "relay a ROS 2 site's topics between DDS and Zenoh (needs rclpy)"),
    "certs": Command("user.cli.certs_cmd", "make a CA and TLS certificates for a deployment's routers and nodes"),
    "topic": Command("user.cli.topic_cmd", "inspect and publish topics (like ros2 topic)"),
    "param": Command("user.cli.param_cmd", "list, get and set a running node's parameters (like ros2 param)"),
    "service": Command("user.cli.service_cmd", "list and call the services of running nodes (like ros2 service)"),
    "graph": Command("user.cli.graph_cmd", "topics with their publishers, subscribers, rates and the links they cross"),
    "hardware": Command("user.cli.hardware_cmd", "list announced robots, cameras and accelerators; check placements"),
    "buffer": Command("user.cli.buffer_cmd", "inspect, verify, import into and export a replay buffer directory"),
    "train-reward": Command(
        "user.cli.reward_cmd",
        "train the learned success reward from a buffer (see user.rewards.labels for the labelling)",
    ),
    "report": Command("user.cli.report_cmd", "write a self-contained HTML report and a PNG summary of a run directory"),
    "view": Command("user.cli.view_cmd", "serve a running deployment's topics to Foxglove over a WebSocket"),
    "completion": Command("user.cli.completion_cmd", "print a bash or zsh completion script for user"),
}


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """The options before the command; `command_of` finds the command behind the same ones."""
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names (after the global options), or None."""
    pre = argparse.ArgumentParser(add_help=False)
    _add_global_options(pre)
    pre.add_argument("command", nargs="?")
    known, _ = pre.parse_known_args(list(argv))
    return known.command if isinstance(known.command, str) else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser listing every command; only `command`'s module is imported and parses its arguments."""
    parser = argparse.ArgumentParser(prog="user", description=__doc__)
    parser.add_argument("--version", action="version", version=f"user {__version__}")
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, entry in COMMANDS.items():
        if name == command:
            importlib.import_module(entry.module).add_parser(sub)
        else:  # a line in the help and a valid choice; never the one parsed, as `command_of` found the command
            sub.add_parser(name, help=entry.help, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in args_in:  # `user node KIND --ros-args ...`: the rclpy runtime
        from user.nodes.ros_entry import main as ros_main

        return ros_main(args_in)
    args = build_parser(command_of(args_in)).parse_args(args_in)
    setup_logging(args.log_level)
    return int(args.func(args))
