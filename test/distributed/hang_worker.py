"""A rank under torchrun for test_hung_rank: rank 1 hangs (never joins the next collective); rank 0 must fail at
the collective deadline, say so in one line and exit, never wait forever."""

from __future__ import annotations

import logging
import sys
import time

import torch
import torch.distributed as dist

from user.distributed.group import RankEnv, close_group, open_group
from user.distributed.ranks import RanksConfig

DEADLINE_S = 3.0


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    group = open_group(RanksConfig(collective_timeout_s=DEADLINE_S), RankEnv.from_environ())
    if group.env.rank == 1:
        time.sleep(3600)  # hung: alive, but never in the collective
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1))
    except RuntimeError as exc:
        print(f"rank 0: the collective failed after {time.monotonic() - started:.1f} s: {exc}"[:300], flush=True)
        sys.exit(1)
    finally:
        close_group()


if __name__ == "__main__":
    main()
