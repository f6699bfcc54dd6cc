"""`user`: bringup, node, router and topic tools."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from user import __version__
from user.cli import bringup_cmd, buffer_cmd, hardware_cmd, node_cmd, reward_cmd, router_cmd, topic_cmd
from user.runtime.logs import setup_logging

COMMANDS = (bringup_cmd, node_cmd, router_cmd, topic_cmd, hardware_cmd, buffer_cmd, reward_cmd)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="user", description=__doc__)
    parser.add_argument("--version", action="version", version=f"user {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--ros-args" in args_in:  # `user node KIND --ros-args ...`: the rclpy runtime
        from user.runtime.ros_runner import main as ros_main

        return ros_main(args_in)
    args = build_parser().parse_args(args_in)
    setup_logging(args.log_level)
    return int(args.func(args))
