"""A rank under torchrun for test_data_parallel: checks on the rank itself that the averaged gradient of its share
is the gradient of the whole batch, that means are means and that every rank starts from the lead's weights; writes
DIR/rank<N>.pt with what it found."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from user.distributed.data_parallel import DataParallel
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig


def main() -> None:
    out = Path(sys.argv[1])
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        dp = DataParallel(group)
        rank, world = group.env.rank, group.env.world_size
        torch.manual_seed(100 + rank)  # different weights on every rank until same_start
        net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
        unused = nn.Linear(2, 2)  # a parameter with no gradient on this rank
        dp.same_start([*net.parameters(), *unused.parameters()])
        x = torch.linspace(-2, 2, 24).reshape(8, 3)
        y = torch.linspace(0, 1, 8).reshape(8, 1)
        share = slice(rank * 8 // world, (rank + 1) * 8 // world)
        (net(x[share]) - y[share]).pow(2).mean().backward()
        dp.average_gradients([*net.parameters(), *unused.parameters()])
        averaged = [p.grad.clone() for p in net.parameters() if p.grad is not None]
        net.zero_grad()
        (net(x) - y).pow(2).mean().backward()  # the whole batch, one process
        whole = [p.grad.clone() for p in net.parameters() if p.grad is not None]
        means = dp.mean({"loss": float(rank), "other": 2.0 * rank})
        torch.save(
            {
                "averaged": averaged,
                "whole": whole,
                "weights": [p.detach().clone() for p in net.parameters()],
                "unused_grad": [p.grad.clone() for p in unused.parameters() if p.grad is not None],
                "means": means,
            },
            out / f"rank{rank}.pt",
        )
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
