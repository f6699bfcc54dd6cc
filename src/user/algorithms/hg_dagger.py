"""HG-DAgger (Kelly et al. 2019): the robot acts, a human takes over when it goes wrong, and the policy is
trained by behaviour cloning on the human's (intervention) actions only, plus demonstrations if asked.

Works for any policy with an imitation loss (MLP, CNN, flow, VLA adapter). The buffer's intervention-only
sampler can feed it directly; rows that are neither intervened nor demos are dropped here in any case.
"""

from __future__ import annotations

from dataclasses import dataclass

from user.algorithms.base import TorchBatch
from user.algorithms.bc import BC, BCConfig
from user.config import setting
from user.policies.base import Policy


@dataclass(frozen=True)
class HGDaggerConfig:
    """HG-DAgger settings."""

    bc: BCConfig = setting(BCConfig(), "the behaviour-cloning step")
    use_demos: bool = setting(True, "also imitate rows marked as demonstrations")


class HGDagger(BC):
    """BC restricted to intervention (and demo) rows."""

    def __init__(self, policy: Policy, config: HGDaggerConfig | None = None) -> None:
        self.hg_config = config or HGDaggerConfig()
        super().__init__(policy, self.hg_config.bc)

    def select(self, batch: TorchBatch) -> TorchBatch:
        keep = batch.intervened | batch.is_demo if self.hg_config.use_demos else batch.intervened
        return batch.select(keep)
