"""The learner node as one of several ranks under torchrun (`ranks` in its settings; `user bringup` and the ROS
launch file start it with `torchrun_command`). Every rank joins the group; the lead (the home machine's first rank)
runs the ordinary learner node, whose session trains with the others; every other rank follows it
(`user.learner.rank_follower`) with no Bus, no buffer and no disk of the lead's. A rank that fails ends its process
with the node's failure code; torchrun then restarts the whole group, which resumes from the lead's checkpoint."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from user.config.strict import ConfigError, from_mapping
from user.distributed.commands import LeadChannel
from user.distributed.current import ThisRank, set_this_rank
from user.distributed.group import RankEnv, RankError, close_group, open_group
from user.distributed.launch import EXIT_FILE_ENV
from user.learner.rank_follower import follow
from user.nodes.learner import LearnerParams
from user.runtime.status import EXIT_FAILED

_log = logging.getLogger("user.learner.rank")
EXIT_RANK_FAILED = EXIT_FAILED  # the node's failure code: torchrun restarts the group (up to ranks.max_restarts)


def handed_over(code: int) -> int:
    """The lead's exit code as torchrun should see it: any code but a failure goes to `user.distributed.launch`
    through its exit file and the rank exits 0 (else torchrun would restart the group, e.g. after a complete run)."""
    exit_file = os.environ.get(EXIT_FILE_ENV)
    if code in (0, EXIT_RANK_FAILED) or not exit_file:
        return code
    Path(exit_file).write_text(f"{code}\n")
    return 0


def started_by_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def run_learner_rank(name: str, parameters: Mapping[str, Any], run_lead: Any) -> int:
    """Join the group and run this rank: `run_lead()` (the ordinary node) on the lead, a follower elsewhere."""
    try:
        params = from_mapping(LearnerParams, parameters, where=f"node {name!r} (learner)")
        env = RankEnv.from_environ()
        group = open_group(params.ranks, env)
    except (ConfigError, RankError, RuntimeError) as exc:
        _log.error("learner rank could not join its group: %s", exc)
        return EXIT_RANK_FAILED
    try:
        if group.is_lead:
            channel = LeadChannel(group, heartbeat_s=params.ranks.collective_timeout_s / 4)
            set_this_rank(ThisRank(group, channel))
            try:
                code: int = run_lead()
            finally:
                channel.close()
            return handed_over(code)
        set_this_rank(ThisRank(group, None))
        # Ctrl-C reaches every process of the launcher's group: the lead stops training and then tells this rank to
        # stop (a follower that died first would fail the lead's update in flight); torchrun's SIGTERM still ends it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return follow(params.learning, group)
    except (RankError, RuntimeError) as exc:  # a peer died or hung past the deadline: torchrun restarts the group
        _log.error("learner rank %d of %d failed: %s", env.rank, env.world_size, exc)
        return EXIT_RANK_FAILED
    finally:
        set_this_rank(None)
        close_group()
