"""A rank under torchrun for test_sac_flow: SAC-Flow with its demonstration BC term trained 3 updates
data-parallel on fixed global batches whose demonstration rows all fall to rank 0's share (rank 1 holds none);
each rank writes its losses, figures and final actor weights to OUT/rank<N>.pt."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

from test.algorithms.factories import fixed_batch
from user.algorithms.sac_flow import SACFlowConfig
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig
from user.learner.ranked_update import RankedUpdate
from user.policies.flow import FlowPolicy, FlowPolicyConfig

ROWS = 16
UPDATES = 3


def main() -> None:
    out = Path(sys.argv[1])
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        flow = FlowPolicy(FlowPolicyConfig(state_dim=3, action_dim=2, hidden=(32,), steps=2))
        config = SACFlowConfig(batch_size=ROWS, num_critics=4, critic_hidden=(32,), bc_weight=0.7)
        algorithm = config.build(flow, seed=3)
        ranked = RankedUpdate(algorithm, group)
        losses, info = [], []
        for k in range(UPDATES):
            batch = None
            if group.is_lead:
                batch = fixed_batch(ROWS, seed=10 + k)
                batch = dataclasses.replace(batch, is_demo=np.arange(ROWS) < 3)  # 3 demos, all in rank 0's share
            stats = ranked.update(batch)
            losses.append(dict(stats.losses))
            info.append(dict(stats.info))
        weights = {k: v.detach().clone() for k, v in algorithm.policy.actor.state_dict().items()}
        torch.save({"losses": losses, "info": info, "weights": weights}, out / f"rank{group.env.rank}.pt")
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
