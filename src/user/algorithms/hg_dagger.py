"""HG-DAgger (Kelly et al. 2019): the robot acts, a human takes over when it goes wrong, and the policy is
trained by behaviour cloning on the human's (intervention) actions only, plus demonstrations if asked.

Works for any policy imitable by loss kind (MLP, CNN) or learning chunks (a VLA: `bc.Imitating`). The buffer's
intervention-only sampler can feed it directly; rows that are neither intervened nor demos are dropped here in any
case.

On action chunks (a chunk learner, the buffer's `chunk_horizon` on) the same rows are kept, each learning its
chunk: by default only the steps of the chunk the human chose (the rest of the intervention segment from that
step on, up to H), since the policy's own actions after the human handed back are not labels; demonstration
rows learn their whole chunk. Every kept row weighs the same, as in HG-DAgger (Kelly et al. 2019).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Literal

import torch

from user.algorithms.base import AlgorithmConfig, TorchBatch
from user.algorithms.bc import BC, BCConfig, Imitating
from user.config import setting
from user.policies.base import Policy

if TYPE_CHECKING:
    from user.buffer.config import SamplerConfig


@dataclass(frozen=True)
class HGDaggerConfig(AlgorithmConfig):
    """HG-DAgger settings."""

    bc: BCConfig = setting(BCConfig(), "the behaviour-cloning step")
    use_demos: bool = setting(True, "also imitate rows marked as demonstrations")
    chunk_steps: Literal["intervened", "all"] = setting(
        "intervened",
        "on action chunks: which steps of an intervened row's chunk are imitated: intervened (those the human "
        "chose) or all (the episode's next actions, the policy's too)",
        choices=("intervened", "all"),
    )

    trains: ClassVar[type[object]] = Imitating  # imitable by loss kind (mse, nll) or learning chunks (a VLA)

    def build(self, policy: Policy, seed: int) -> HGDagger:
        del seed  # behaviour cloning draws nothing at random
        return HGDagger(policy, self)

    def rows_per_update(self) -> int:
        return self.bc.batch_size

    def gradient_steps_per_update(self) -> int:
        return 1

    def auto_sampler(self, sampler: SamplerConfig) -> SamplerConfig:
        """The intervention sampler: it learns from the human's corrections."""
        return replace(sampler, kind="intervention")


class HGDagger(BC):
    """BC restricted to intervention (and demo) rows."""

    def __init__(self, policy: Policy, config: HGDaggerConfig | None = None) -> None:
        self.hg_config = config or HGDaggerConfig()
        super().__init__(policy, self.hg_config.bc)

    def select(self, batch: TorchBatch) -> TorchBatch:
        keep = batch.intervened | batch.is_demo if self.hg_config.use_demos else batch.intervened
        return batch.select(keep)

    def chunk_mask(self, batch: TorchBatch) -> torch.Tensor:
        """The human's steps of each selected row's chunk (demonstration rows: all of their episode's)."""
        mask = super().chunk_mask(batch)
        if self.hg_config.chunk_steps == "all" or batch.chunk_intervened is None:
            return mask
        return mask & (batch.chunk_intervened | batch.is_demo[:, None])
