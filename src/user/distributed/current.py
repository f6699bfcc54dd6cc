"""The rank this process is, once torchrun started it as one of a learner's ranks: its group and, on the lead, the
channel its commands go through. A process is one rank for its whole life, so this is set once, at its start
(`user.learner.rank_entry`), and read by the learning session; None in a learner of one process."""

from __future__ import annotations

from dataclasses import dataclass

from user.distributed.commands import LeadChannel
from user.distributed.group import RankGroup


@dataclass(frozen=True)
class ThisRank:
    group: RankGroup
    channel: LeadChannel | None  # the lead's command channel (None on the other ranks)


_this: ThisRank | None = None


def set_this_rank(rank: ThisRank | None) -> None:
    global _this
    _this = rank


def this_rank() -> ThisRank | None:
    return _this
