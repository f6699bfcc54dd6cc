"""A co-located rollout's weight link in its own process, for test_weight_link: joins the learner's link at argv[1]
and appends every version it acts with to the file argv[2] (one line each: version and the value of its first
weight), until killed or `LIFETIME_S` passed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from user.learner.config import LearningConfig
from user.policies.mlp import MLPPolicyConfig
from user.sync.link_receiver import LinkJoin, WeightLinkReceiver

LIFETIME_S = 120.0  # a worker the test forgot ends by itself


def learning(hidden: tuple[int, ...] = (8,)) -> LearningConfig:
    """The policy of these tests (the learner's and the rollout's must match)."""
    return LearningConfig(mlp=MLPPolicyConfig(state_dim=7, action_dim=4, hidden=hidden), exclude_state_prefixes=())


def main(address: str, out: Path) -> None:
    receiver = WeightLinkReceiver(LinkJoin(address=address, timeout_s=10.0), learning().build_policy(),
                                  policy_id="policy", name=f"worker-{out.stem}")  # fmt: skip
    deadline = time.monotonic() + LIFETIME_S
    seen = 0
    while time.monotonic() < deadline:
        if receiver.wait_for_version(seen + 1, 1.0):
            weights = receiver.snapshot()
            seen = weights.version
            with out.open("a") as f:
                f.write(f"{seen} {float(weights.data[0])}\n")
    receiver.close()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
