"""A rank of a learner spread over two "machines" (network namespaces) for test_two_machines: the home rank reads
its data directory and samples a global batch from it; the other rank must not see that directory (the test hides
it behind an empty mount) and gets its share over the network. Writes OUT/rank<N>.npz."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from test.distributed.share_worker import global_batch
from user.distributed.batch_share import share_batch
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig


def main() -> None:
    data, out = Path(sys.argv[1]), Path(sys.argv[2])
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        sees_data = (data / "buffer.marker").is_file()
        batch = None
        if group.is_lead:
            if not sees_data:
                raise SystemExit(f"the lead cannot read its own data in {data}")
            batch = global_batch(decode=True)
        share = share_batch(group, batch)
        np.savez(
            out / f"rank{group.env.rank}.npz",
            lead=np.array(group.is_lead),
            sees_data=np.array(sees_data),
            indices=share.indices,
            state=share.state,
        )
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
