"""A learner rank other than the lead: the same algorithm, trained in step with the lead on shares of its batches,
with no Bus, no buffer and no checkpoints of its own (the lead holds the whole state; a restart resumes from the
lead's checkpoint and hands it to every rank). It does what the lead's commands say until told to stop: with a
sharded actor it also joins the gathers of its weights for publication and writes its shards of each checkpoint."""

from __future__ import annotations

import logging

from user.distributed.commands import Op, receive
from user.distributed.group import RankError, RankGroup
from user.learner import rank_checkpoint
from user.learner.checkpoint import CheckpointWriteError
from user.learner.config import LearningConfig
from user.learner.ranked_update import RankedUpdate

_log = logging.getLogger("user.learner.rank")


def follow(learning: LearningConfig, group: RankGroup) -> int:
    """Train as a follower of the lead until it says stop; the exit code (0: told to stop)."""
    policy = learning.build_policy().to(group.device)
    algorithm = learning.build_algorithm(policy)
    ranked: RankedUpdate | None = None
    updates = 0
    while True:
        op = receive(group)
        if op is Op.START:
            ranked = RankedUpdate(algorithm, group)
            _log.info("rank %d trains with the lead (rank %d) from its state", group.env.rank, group.lead)
        elif op is Op.UPDATE:
            if ranked is None:
                raise RankError("the lead sent an update before the start")
            ranked.update(None)
            updates += 1
        elif op is Op.GATHER:
            if ranked is None:
                raise RankError("the lead gathered weights before the start")
            ranked.gather(None)
        elif op is Op.CHECKPOINT:
            try:
                rank_checkpoint.join_save(algorithm, group)
            except CheckpointWriteError as exc:  # the lead logs it too and goes on training: so does this rank
                _log.error("rank %d: %s", group.env.rank, exc)
        elif op is Op.STOP:
            _log.info("rank %d stops after %d updates: the lead said so", group.env.rank, updates)
            return 0
