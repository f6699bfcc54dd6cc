"""What a learner trains and how: the policy, the algorithm and the pacing against incoming data.

One `LearningConfig` is shared by the learner (which trains) and the rollout nodes (which act): both build
the policy from `policy_kind`'s section, so the weights the learner publishes fit the policy a robot site runs.
The algorithm kinds are `user.algorithms.registry.ALGORITHMS` (each a settings class that builds its algorithm),
the policy kinds `POLICIES`; each kind has its section here, named after it (the tests hold the choices, the
sections and the tables together).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from user.algorithms.base import Algorithm, AlgorithmConfig
from user.algorithms.hg_dagger import HGDaggerConfig
from user.algorithms.registry import ALGORITHMS
from user.algorithms.rlpd import RLPDConfig
from user.algorithms.sac import SACConfig
from user.algorithms.sac_flow import SACFlowConfig
from user.buffer.config import BufferConfig, SamplerConfig
from user.config.strict import ConfigError, setting
from user.learner.state_select import PRIVILEGED_PREFIX, StateSelector
from user.learner.task_condition import PolicyState, TaskConditioner
from user.policies.base import Policy
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.flow import FlowPolicy, FlowPolicyConfig
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.pi0.kind import VLAKindConfig, build_vla_policy
from user.policies.vla import VLAPolicy

AlgorithmKind = Literal["rlpd", "sac", "sac_flow", "hg_dagger"]  # the names of ALGORITHMS
PolicyKind = Literal["mlp", "cnn", "flow", "vla"]  # the names of POLICIES


@dataclass(frozen=True)
class PolicyEntry:
    """One policy kind a run selects by name (`learning.policy_kind`); its settings are the section of that name."""

    policy: type[Policy]  # the class it builds (what an algorithm's `trains` is checked against)
    build: Callable[[Any], Policy]  # a fresh policy from its section
    algorithms: tuple[str, ...] | None = None  # the only algorithms that train it (None: each whose `trains` fits)

    def trained_by(self, algorithm: str) -> bool:
        """Whether `algorithm` can train this kind's policy."""
        fits = issubclass(self.policy, ALGORITHMS[algorithm].trains)
        return fits and (self.algorithms is None or algorithm in self.algorithms)


POLICIES: dict[str, PolicyEntry] = {
    "mlp": PolicyEntry(MLPPolicy, MLPPolicy),
    "cnn": PolicyEntry(CNNPolicy, CNNPolicy),
    "flow": PolicyEntry(FlowPolicy, FlowPolicy),
    # a VLA gives no action log-likelihood (SAC-style learners cannot train it); it imitates, on whole chunks
    "vla": PolicyEntry(VLAPolicy, build_vla_policy, algorithms=("hg_dagger",)),
}


class PolicySettings(Protocol):
    """What the learner reads of every policy kind's section besides building it."""

    @property
    def state_dim(self) -> int: ...


@dataclass(frozen=True)
class LearningConfig:
    """The policy and algorithm of a run (shared by learner and rollout)."""

    policy_id: str = setting("policy", "name of the policy; weight chunks carry it, subscribers check it")
    policy_kind: PolicyKind = setting(
        "mlp", "mlp: state only; cnn: camera images + state; flow: flow matching; vla: a π0-shaped VLA (action chunks)"
    )
    mlp: MLPPolicyConfig = setting(
        MLPPolicyConfig(state_dim=17, action_dim=7), "policy_kind mlp: the network", when=("policy_kind", "mlp")
    )
    cnn: CNNPolicyConfig = setting(CNNPolicyConfig(), "policy_kind cnn: the network", when=("policy_kind", "cnn"))
    flow: FlowPolicyConfig = setting(
        FlowPolicyConfig(), "policy_kind flow: the network (for sac_flow)", when=("policy_kind", "flow")
    )
    vla: VLAKindConfig = setting(
        VLAKindConfig(size="test"),
        "policy_kind vla: the π0 model (checkpoint or size test) and how it is driven (for hg_dagger)",
        when=("policy_kind", "vla"),
    )
    algorithm: AlgorithmKind = setting("rlpd", ", ".join(ALGORITHMS))
    rlpd: RLPDConfig = setting(RLPDConfig(), "algorithm rlpd: its settings", when=("algorithm", "rlpd"))
    sac: SACConfig = setting(SACConfig(), "algorithm sac: its settings", when=("algorithm", "sac"))
    sac_flow: SACFlowConfig = setting(
        SACFlowConfig(), "algorithm sac_flow: its settings (policy_kind flow)", when=("algorithm", "sac_flow")
    )
    hg_dagger: HGDaggerConfig = setting(
        HGDaggerConfig(), "algorithm hg_dagger: its settings", when=("algorithm", "hg_dagger")
    )
    exclude_state_prefixes: tuple[str, ...] = setting(
        (PRIVILEGED_PREFIX,), "state entries whose names start with these are hidden from the policy"
    )
    tasks: tuple[str, ...] = setting(
        (),
        "one policy for several tasks: its state is a one-hot of the robot's task (in this order), then that task's "
        "own state zero-padded to state_dim - len(tasks) (user.learner.task_condition); empty: one task, as sent",
    )
    seed: int = setting(0, "seed of the algorithm's random draws")

    def __post_init__(self) -> None:
        if not POLICIES[self.policy_kind].trained_by(self.algorithm):
            fits = " or ".join(k for k, e in POLICIES.items() if e.trained_by(self.algorithm))
            raise ConfigError(
                f"algorithm {self.algorithm} cannot train a policy of policy_kind {self.policy_kind}; "
                f"select policy_kind {fits}"
            )
        self.conditioner()  # a ConfigError now, not at the first observation

    @property
    def policy_settings(self) -> PolicySettings:
        """The selected policy kind's section."""
        section: PolicySettings = getattr(self, self.policy_kind)
        return section

    @property
    def algorithm_settings(self) -> AlgorithmConfig:
        """The selected algorithm's section, which builds it."""
        section: AlgorithmConfig = getattr(self, self.algorithm)
        return section

    @property
    def state_dim(self) -> int:
        return self.policy_settings.state_dim

    def build_policy(self) -> Policy:
        """A fresh policy (random init from its seed)."""
        return POLICIES[self.policy_kind].build(self.policy_settings)

    def build_algorithm(self, policy: Policy) -> Algorithm:
        """The algorithm that trains `policy` (only the learner calls this)."""
        return self.algorithm_settings.build(policy, self.seed)

    def sampler_for(self, sampler: SamplerConfig) -> SamplerConfig:
        """The buffer's sampler for this algorithm: `auto` (the default) becomes the algorithm's own kind; a kind
        chosen by name is kept."""
        return self.algorithm_settings.auto_sampler(sampler) if sampler.kind == "auto" else sampler

    def state_selector(self) -> StateSelector:
        """What the policy sees of a state as it is batched (conditioned already, with `tasks`)."""
        return StateSelector(self.exclude_state_prefixes, self.state_dim)

    def conditioner(self) -> TaskConditioner | None:
        """With `tasks`: the task conditioning of every observation and transition; else None."""
        return TaskConditioner(self.tasks, self.state_dim, self.exclude_state_prefixes) if self.tasks else None

    def policy_state(self) -> PolicyState:
        """The state the policy acts on, from an observation as a robot sends it."""
        return PolicyState(self.state_selector(), self.conditioner())

    @property
    def batch_size(self) -> int:
        """Rows per `update` call."""
        return self.algorithm_settings.rows_per_update()

    @property
    def gradient_steps_per_update(self) -> int:
        """Gradient (critic) steps one `update` call takes."""
        return self.algorithm_settings.gradient_steps_per_update()


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


def check_chunk_horizon(learning: LearningConfig, buffer: BufferConfig) -> None:
    """A VLA learner learns whole chunks of its model's size: its buffer must hand it chunks of exactly that many
    actions (`buffer.chunk_horizon`)."""
    if learning.policy_kind != "vla":
        return
    size = learning.vla.model_chunk_size()
    if buffer.chunk_horizon != size:
        raise ConfigError(
            f"buffer.chunk_horizon {buffer.chunk_horizon} differs from the VLA model's chunk size {size} "
            f"(learning.vla): set buffer.chunk_horizon: {size}"
        )
