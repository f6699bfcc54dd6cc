"""What a learner trains and how: the policy, the algorithm and the pacing against incoming data.

One `LearningConfig` is shared by the learner (which trains) and the rollout nodes (which act): both build
the policy from `policy`, so the weights the learner publishes fit the policy a robot site runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from user.algorithms.base import Algorithm
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.buffer.config import SamplerConfig
from user.config.strict import ConfigError, setting
from user.learner.state_select import PRIVILEGED_PREFIX, StateSelector
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.gaussian import GaussianPolicy
from user.policies.mlp import MLPPolicy, MLPPolicyConfig

AlgorithmKind = Literal["rlpd", "sac", "hg_dagger"]
PolicyKind = Literal["mlp", "cnn"]


@dataclass(frozen=True)
class LearningConfig:
    """The policy and algorithm of a run (shared by learner and rollout)."""

    policy_id: str = setting("policy", "name of the policy; weight chunks carry it, subscribers check it")
    policy_kind: PolicyKind = setting("mlp", "mlp: state only; cnn: camera images + state")
    mlp: MLPPolicyConfig = setting(
        MLPPolicyConfig(state_dim=17, action_dim=7), "policy_kind mlp: the network", when=("policy_kind", "mlp")
    )
    cnn: CNNPolicyConfig = setting(CNNPolicyConfig(), "policy_kind cnn: the network", when=("policy_kind", "cnn"))
    algorithm: AlgorithmKind = setting("rlpd", "rlpd, sac or hg_dagger")
    rlpd: RLPDConfig = setting(RLPDConfig(), "algorithm rlpd: its settings", when=("algorithm", "rlpd"))
    sac: SACConfig = setting(SACConfig(), "algorithm sac: its settings", when=("algorithm", "sac"))
    hg_dagger: HGDaggerConfig = setting(
        HGDaggerConfig(), "algorithm hg_dagger: its settings", when=("algorithm", "hg_dagger")
    )
    exclude_state_prefixes: tuple[str, ...] = setting(
        (PRIVILEGED_PREFIX,), "state entries whose names start with these are hidden from the policy"
    )
    seed: int = setting(0, "seed of the algorithm's random draws")

    @property
    def state_dim(self) -> int:
        return POLICIES[self.policy_kind].settings(self).state_dim

    def build_policy(self) -> GaussianPolicy:
        """A fresh policy (random init from its seed)."""
        return POLICIES[self.policy_kind].build(self)

    def build_algorithm(self, policy: GaussianPolicy) -> Algorithm:
        """The algorithm that trains `policy` (only the learner calls this)."""
        return ALGORITHMS[self.algorithm].build(self, policy)

    def sampler_for(self, sampler: SamplerConfig) -> SamplerConfig:
        """The buffer's sampler for this algorithm: `auto` (the default) becomes the algorithm's own kind; a kind
        chosen by name is kept."""
        return ALGORITHMS[self.algorithm].sampler(self, sampler) if sampler.kind == "auto" else sampler

    def state_selector(self) -> StateSelector:
        return StateSelector(self.exclude_state_prefixes, self.state_dim)

    @property
    def batch_size(self) -> int:
        """Rows per `update` call."""
        return ALGORITHMS[self.algorithm].batch_size(self)

    @property
    def gradient_steps_per_update(self) -> int:
        """Gradient (critic) steps one `update` call takes."""
        return ALGORITHMS[self.algorithm].gradient_steps(self)


@dataclass(frozen=True)
class AlgorithmEntry:
    """What the learner needs to know of one algorithm kind."""

    build: Callable[[LearningConfig, GaussianPolicy], Algorithm]  # the algorithm training a policy
    batch_size: Callable[[LearningConfig], int]  # rows per update call
    gradient_steps: Callable[[LearningConfig], int]  # gradient (critic) steps per update call
    sampler: Callable[[LearningConfig, SamplerConfig], SamplerConfig]  # what an `auto` sampler becomes


@dataclass(frozen=True)
class PolicyEntry:
    """What the learner and the rollout need to know of one policy kind."""

    settings: Callable[[LearningConfig], MLPPolicyConfig | CNNPolicyConfig]  # the kind's own section
    build: Callable[[LearningConfig], GaussianPolicy]  # a fresh policy of that kind


POLICIES: dict[str, PolicyEntry] = {
    "mlp": PolicyEntry(settings=lambda c: c.mlp, build=lambda c: MLPPolicy(c.mlp)),
    "cnn": PolicyEntry(settings=lambda c: c.cnn, build=lambda c: CNNPolicy(c.cnn)),
}


ALGORITHMS: dict[str, AlgorithmEntry] = {
    "rlpd": AlgorithmEntry(
        build=lambda c, policy: RLPD(policy, c.rlpd, seed=c.seed),
        batch_size=lambda c: c.rlpd.batch_size,
        gradient_steps=lambda c: c.rlpd.utd_ratio,
        # demonstrations mixed into every batch at RLPD's own ratio
        sampler=lambda c, s: replace(s, kind="demo_ratio", demo_ratio=c.rlpd.demo_ratio),
    ),
    "sac": AlgorithmEntry(
        build=lambda c, policy: SAC(policy, c.sac, seed=c.seed),
        batch_size=lambda c: c.sac.batch_size,
        gradient_steps=lambda c: c.sac.utd_ratio,
        # auto as it is: half demonstrations once there are any (SAC from demos), uniform while there are none
        sampler=lambda _c, s: s,
    ),
    "hg_dagger": AlgorithmEntry(
        build=lambda c, policy: HGDagger(policy, c.hg_dagger),
        batch_size=lambda c: c.hg_dagger.bc.batch_size,
        gradient_steps=lambda _c: 1,
        sampler=lambda _c, s: replace(s, kind="intervention"),  # learns from the human's corrections
    ),
}


@dataclass(frozen=True)
class PacingConfig:
    """How much the learner trains per transition received, and when it publishes."""

    mode: Literal["async", "sync"] = setting(
        "async", "async: train continuously beside collection; sync: collect an episode, then train, then sync"
    )
    updates_per_step: float = setting(
        1.0, "gradient (critic) steps per environment transition received: the update-to-data ratio", min=0.0
    )
    min_transitions: int = setting(256, "transitions stored (demos included) before the first update", min=1)
    publish_every: int = setting(
        50, "async: publish the policy every this many update calls (sync: after every training phase)", min=1
    )
    weight_dtype: Literal["float32", "float16", "bfloat16"] = setting("float32", "dtype of published weights")
    weight_delta: bool = setting(
        False,
        "compress published weights and send each tensor as a delta on the previous version when smaller "
        "(wide-area links; user.sync.delta)",
    )
    keyframe_every: int = setting(20, "weight_delta: every this many versions is sent whole", min=1)
    sample_timeout_s: float = setting(0.5, "longest wait for a batch before the loop checks for shutdown", min=0.01)


def check_batch_split(learning: LearningConfig) -> None:
    """An update call's batch must split into its gradient steps."""
    if learning.batch_size < learning.gradient_steps_per_update:
        raise ConfigError(
            f"batch_size {learning.batch_size} cannot be split into {learning.gradient_steps_per_update} gradient steps"
        )
