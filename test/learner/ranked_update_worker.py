"""A rank under torchrun for test_ranked_update: every algorithm trained 3 updates data-parallel on fixed global
batches; each rank writes the losses and the final weights to OUT/<algorithm>_rank<N>.pt. Run with 1 and with 2
ranks, the test compares."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

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
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.flow import FlowPolicy, FlowPolicyConfig
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

ROWS = 16
UPDATES = 3
CAMERAS = {"left": (16, 16), "right": (16, 16)}
SMALL: dict[str, Any] = {"batch_size": ROWS, "num_critics": 4, "critic_hidden": (32,)}


def mlp() -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(32, 32)))


def cnn() -> CNNPolicy:
    encoder = ImageEncoderConfig(channels=(4, 4, 8, 8), stem_channels=4, groups=2, spatial_features=2, bottleneck=8)
    obs = ObservationConfig(cameras=tuple(CAMERAS), image_size=16)
    return CNNPolicy(CNNPolicyConfig(state_dim=3, action_dim=2, observation=obs, encoder=encoder, hidden=(16,)))


def build(name: str) -> tuple[Algorithm, bool]:
    """The algorithm and whether its batches carry images."""
    if name == "sac":
        return SACConfig(**SMALL, critic_subsample=2, utd_ratio=2).build(mlp(), seed=3), False
    if name == "rlpd":
        return RLPDConfig(**SMALL, utd_ratio=2).build(mlp(), seed=3), False
    if name == "sac_drq_images":
        return SACConfig(**SMALL, augmentation="drq", drq_pad=2).build(cnn(), seed=3), True
    if name == "sac_flow":
        flow = FlowPolicy(FlowPolicyConfig(state_dim=3, action_dim=2, hidden=(32,), steps=2))
        return SACFlowConfig(**SMALL).build(flow, seed=3), False
    if name == "bc":
        return BC(mlp(), BCConfig(batch_size=ROWS, loss="nll")), False
    if name == "hg_dagger":
        return HGDagger(mlp()), False
    raise SystemExit(f"unknown algorithm {name}")


def main() -> None:
    out, names = Path(sys.argv[1]), sys.argv[2:]
    group = open_group(RanksConfig(collective_timeout_s=60.0), RankEnv.from_environ())
    try:
        for name in names:
            algorithm, images = build(name)
            ranked = RankedUpdate(algorithm, group)
            losses: list[dict[str, float]] = []
            for k in range(UPDATES):
                batch = fixed_batch(ROWS, seed=10 + k, images=CAMERAS if images else None) if group.is_lead else None
                stats = ranked.update(batch)
                losses.append(dict(stats.losses))
            weights: dict[str, Any] = {
                f"actor.{k}": v.detach().clone() for k, v in algorithm.policy.actor.state_dict().items()
            }
            torch.save({"losses": losses, "weights": weights}, out / f"{name}_rank{group.env.rank}.pt")
    finally:
        close_group()


if __name__ == "__main__":
    main()
    end_process(0)  # no interpreter teardown: torch's C++ threads can abort it after the work is done
