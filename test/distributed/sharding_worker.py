"""A rank under torchrun for test_sharding: BC, HG-DAgger, SAC, RLPD and SAC-Flow trained 3 updates on fixed
global batches with the actor sharded (`shard: on`; one rank trains it whole), the Gaussian actor a stack of blocks
in an nn.ModuleList. Each rank writes its losses, the full actor parameters, whether they were DTensors, and (the
lead) the weights published through the gather, or (another rank) why it cannot publish, to
OUT/<algorithm>_rank<N>.pt. `OUT --bf16 ...`: the actor computes in bf16."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from test.algorithms.factories import fixed_batch
from user.algorithms.base import Algorithm
from user.algorithms.bc import BC, BCConfig
from user.algorithms.hg_dagger import HGDagger
from user.algorithms.rlpd import RLPDConfig
from user.algorithms.sac import SACConfig
from user.algorithms.sac_flow import SACFlowConfig
from user.distributed.group import RankEnv, close_group, end_process, open_group
from user.distributed.ranks import RanksConfig
from user.learner.ranked_update import RankedUpdate
from user.policies.base import PolicyError
from user.policies.flow import FlowPolicy, FlowPolicyConfig
from user.policies.gaussian import GaussianActor, GaussianPolicy, TanhGaussianHead
from user.policies.mlp import MLPPolicy, MLPPolicyConfig, StateEncoder

ROWS = 16
UPDATES = 3
SMALL: dict[str, Any] = {"batch_size": ROWS, "num_critics": 4, "critic_hidden": (32,)}


class Stack(nn.Module):
    """Blocks in an nn.ModuleList, as a transformer's: each one its own FSDP unit."""

    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(a, b), nn.ReLU()) for a, b in itertools.pairwise(sizes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class StackPolicy(MLPPolicy):
    def __init__(self, config: MLPPolicyConfig) -> None:
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            trunk = Stack((config.state_dim, *config.hidden))
            head = TanhGaussianHead(config.hidden[-1], config.action_dim, config.log_std_min, config.log_std_max)
        GaussianPolicy.__init__(self, GaussianActor(StateEncoder(config.state_dim), trunk, head), config.action_dim)


def policy() -> StackPolicy:
    return StackPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32, 32)))


def build(name: str) -> Algorithm:
    if name == "bc":
        return BC(policy(), BCConfig(batch_size=ROWS, loss="nll", grad_clip=0.5))
    if name == "hg_dagger":
        return HGDagger(policy())
    if name == "sac":
        return SACConfig(**SMALL, critic_subsample=2, utd_ratio=2, grad_clip=1.0).build(policy(), seed=3)
    if name == "rlpd":
        return RLPDConfig(**SMALL, utd_ratio=2).build(policy(), seed=3)
    if name == "sac_flow":  # an actor without a forward: its encoder and velocity net are sharded as roots
        flow = FlowPolicy(FlowPolicyConfig(state_dim=3, action_dim=2, hidden=(32,), steps=2))
        return SACFlowConfig(**SMALL).build(flow, seed=3)
    raise SystemExit(f"unknown algorithm {name}")


def main() -> None:
    out, names = Path(sys.argv[1]), sys.argv[2:]
    dtype = "float32"
    if names and names[0] == "--bf16":  # bf16 parameters and compute, float32 reduction (the GPU default)
        dtype, names = "bf16", names[1:]
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        for name in names:
            algorithm = build(name)
            ranked = RankedUpdate(algorithm, group, RanksConfig(shard="on", shard_dtype=dtype))
            losses: list[dict[str, float]] = []
            for k in range(UPDATES):
                batch = fixed_batch(ROWS, seed=10 + k, images=None) if group.is_lead else None
                losses.append(dict(ranked.update(batch).losses))
            actor = algorithm.policy.actor
            sharded = [isinstance(p, DTensor) and p.dtype == torch.float32 for p in actor.parameters()]
            weights = {
                n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
                for n, p in actor.named_parameters()
            }
            published: Any = None
            if not ranked.sharded or group.is_lead:
                algorithm.policy.gather_with(ranked.gather if ranked.sharded else None)
                published = algorithm.policy.get_weights().data.clone()
            else:
                try:
                    algorithm.policy.get_weights()
                except PolicyError as exc:
                    published = str(exc)
                ranked.gather(None)  # the lead's gather, which every rank joins
            result = {"losses": losses, "weights": weights, "sharded": sharded, "published": published}
            torch.save(result, out / f"{name}_rank{group.env.rank}.pt")
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
