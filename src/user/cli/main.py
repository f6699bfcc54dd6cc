"""`user`: bringup, node, router and topic tools."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from user import __version__
from user.runtime.logs import setup_logging

# command -> the module that adds its parser and runs it. A command imports only its own module: `user router`
# starts without the learning stack (torch), which `user buffer` and `user train-reward` need.
COMMANDS: dict[str, str] = {
    "bringup": "user.cli.bringup_cmd",
    "node": "user.cli.node_cmd",
    "router": "user.cli.router_cmd",
    "topic": "user.cli.topic_cmd",
    "hardware": "user.cli.hardware_cmd",
    "buffer": "user.cli.buffer_cmd",
    "train-reward": "user.cli.reward_cmd",
}


def _command_modules(command: str | None) -> list[ModuleType]:
    """The module of `command`, or (no or an unknown command: help and usage errors list them) all of them."""
    names = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    return [importlib.import_module(name) for name in names]


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names (after the global options), or None."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--log-level")
    pre.add_argument("command", nargs="?")
    known, _ = pre.parse_known_args(list(argv))
    return known.command if isinstance(known.command, str) else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` alone (its module only is imported), or of every command when None."""
    parser = argparse.ArgumentParser(prog="user", description=__doc__)
    parser.add_argument("--version", action="version", version=f"user {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _command_modules(command):
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in args_in:  # `user node KIND --ros-args ...`: the rclpy runtime
        from user.runtime.ros_runner import main as ros_main

        return ros_main(args_in)
    args = build_parser(command_of(args_in)).parse_args(args_in)
    setup_logging(args.log_level)
    return int(args.func(args))
