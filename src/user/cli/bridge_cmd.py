"""`user bridge`: the bridge of a ROS 2 site (node kind `bridge`, `user.nodes.bridge`) on rclpy, relaying the
site's robots' learner traffic and the listed topics between DDS and a Zenoh router."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("bridge", help="relay a ROS 2 site's topics between DDS and Zenoh (needs rclpy)")
    p.add_argument("--robots", default="", help="comma-separated robot ids of this site (their learner traffic)")
    p.add_argument("--to-zenoh", action="append", default=[], metavar="'TOPIC TYPE [QOS]'", help="more topics out")
    p.add_argument("--to-ros", action="append", default=[], metavar="'TOPIC TYPE [QOS]'", help="more topics in")
    p.add_argument("--router", action="append", default=[], metavar="ENDPOINT", help="Zenoh router (repeatable)")
    p.add_argument("--domain", default="", help="the Zenoh side's domain (default: USER_DOMAIN)")
    p.add_argument("--name", default="bridge", help="the node's name")
    p.set_defaults(func=run)


def ros_arguments(args: argparse.Namespace) -> list[str]:
    """The `user_node bridge --ros-args ...` command line of these options."""
    values = {
        "robots": [r.strip() for r in args.robots.split(",") if r.strip()],
        "to_zenoh": args.to_zenoh,
        "to_ros": args.to_ros,
        "zenoh_router": args.router,
        "domain": args.domain,
    }
    argv = ["bridge", "--ros-args", "-r", f"__node:={args.name}"]
    for key, value in values.items():
        if value:
            argv += ["-p", f"{key}:={json.dumps(value)}"]
    return argv


def run(args: argparse.Namespace) -> int:
    from user.runtime.ros_runner import run_ros_node

    return run_ros_node(ros_arguments(args))
