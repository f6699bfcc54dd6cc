"""The `user_node` executable (what ros2 launch / ros2 run start: `user_node KIND --ros-args ...`).

Any node runs on rclpy through `user.runtime.ros_runner`. A learner with `ranks` is started by torchrun (the launch
file's `prefix`), so every rank runs this same command line: the lead rank is the ROS node, the others follow it with
no ROS at all, reading the learner's settings from the parameter file launch wrote for the node
(`user.nodes.parts.learner_rank_params`).
"""

from __future__ import annotations

import logging
import sys

from user.runtime.kinds import UnknownNodeKindError
from user.runtime.logs import setup_logging
from user.runtime.ros_runner import run_ros_node, split_kind
from user.runtime.status import EXIT_CONFIG_ERROR, EXIT_FAILED

_log = logging.getLogger("user.ros_runner")


def run_ros_rank(argv: list[str]) -> int:
    """One rank of a learner started by torchrun: the lead runs the ROS node, the others follow it (no ROS)."""
    from user.distributed.group import end_process
    from user.nodes.learner_ranks import run_learner_rank
    from user.nodes.parts.learner_rank_params import RankParamsError, rank_params

    try:
        name, parameters = rank_params(argv)
    except RankParamsError as exc:
        _log.error("learner rank could not read its settings: %s", exc)
        return EXIT_CONFIG_ERROR
    end_process(run_learner_rank(name, parameters, lambda: run_ros_node(argv)))
    return EXIT_FAILED  # end_process never returns


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `user_node` executable."""
    from user.runtime.priority import apply_niceness_from_env

    setup_logging()
    apply_niceness_from_env()
    args = list(sys.argv[1:] if argv is None else argv)
    if _learner_rank(args):
        return run_ros_rank(args)
    return run_ros_node(args)


def _learner_rank(argv: list[str]) -> bool:
    """Whether this process is one of a learner's ranks (started by torchrun)."""
    try:
        kind, _ = split_kind(argv)
    except UnknownNodeKindError:
        return False
    if kind != "learner":
        return False  # no other node imports what the learner's ranks need
    from user.nodes.learner_ranks import started_by_torchrun

    return started_by_torchrun()
