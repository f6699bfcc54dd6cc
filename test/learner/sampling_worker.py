"""A rank under torchrun for test_ranked_sampling: the lead fills a real replay buffer (its own directory), samples
global batches with the configured sampler and seed and shares them; every rank writes the buffer indices it
trained on to OUT/rank<N>.npy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from test.buffer.factories import episode
from user.buffer.config import BufferConfig, RateLimiterConfig, SamplerConfig, StorageConfig
from user.buffer.replay import ReplayBuffer
from user.config.strict import from_mapping
from user.distributed.batch_share import share_batch
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig

BATCHES = 40
BATCH = 16


def main() -> None:
    out = Path(sys.argv[1])  # argv[2]: the sampler kind
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        buffer = None
        if group.is_lead:
            config = BufferConfig(
                storage=StorageConfig(cache_size=1000),
                rate_limiter=RateLimiterConfig(min_size=1),
                sampler=from_mapping(SamplerConfig, {"kind": sys.argv[2], "seed": 5}, where="sampler"),
                batch_size=BATCH,
                prefetch=0,
            )
            buffer = ReplayBuffer.open(out / "buffer", config)
            for e in range(6):
                buffer.add_episode(episode("a", e, steps=7))
        seen = []
        for _ in range(BATCHES):
            batch = buffer.sample(timeout_s=10.0) if buffer is not None else None
            seen.append(share_batch(group, batch).indices)
        np.save(out / f"rank{group.env.rank}.npy", np.concatenate(seen))
        if buffer is not None:
            buffer.close()
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
