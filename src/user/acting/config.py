"""`ActingConfig`: how a rollout's session acts, declared once; the rollout node's settings extend it
(`RolloutParams`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from user.acting.chunks import ChunkingConfig
from user.config.strict import ConfigError, setting
from user.learner.config import LearningConfig


@dataclass(frozen=True)
class ActingConfig:
    """How a session acts, declared once: the rollout node's settings extend it (`RolloutParams`)."""

    learning: LearningConfig = setting(LearningConfig(), "policy (must match the learner's)")
    device: str = setting("cpu", "where the policy acts: cpu, cuda, cuda:N, or auto (the first GPU when there is one)")
    apply: Literal["episode_boundary", "immediate"] = setting(
        "episode_boundary", "when a robot switches to new weights"
    )
    deterministic: bool = setting(False, "act with the mean action (evaluation) instead of sampling (exploration)")
    wait_for_weights: bool = setting(True, "do not act before the first weights arrived (the robot holds)")
    start_episode: int = setting(0, "answer only episodes with this id or later (earlier: demos by an expert)", min=0)
    random_steps: int = setting(
        0,
        "act uniformly at random in [-1, 1] until the learner has received this many transitions (its stats' "
        "env_steps), as standard SAC warms up (CleanRL: 5000 steps); 0 = act with the policy from the start",
        min=0,
    )
    sync_timeout_s: float = setting(
        600.0, "sync: longest wait for the learner's version trained on a robot's episode, s", min=0.1
    )
    send: Literal["actions", "chunks"] = setting(
        "actions",
        "actions: an action per observation on /<robot>/action; chunks: whole action chunks on /<robot>/action_chunk "
        "that the robot plays itself (its actions_from: chunks), for a chunking policy (policy_kind vla)",
    )
    chunking: ChunkingConfig = setting(
        ChunkingConfig(), "send chunks: when a robot gets its next chunk and how it continues", when=("send", "chunks")
    )

    def __post_init__(self) -> None:
        if self.send != "chunks":
            return
        if self.learning.policy_kind != "vla":
            raise ConfigError(
                f"send: chunks needs a chunking policy (policy_kind vla), not {self.learning.policy_kind}"
            )
        if self.random_steps:
            raise ConfigError("send: chunks acts with the policy from the start: set random_steps to 0")
        vla = self.learning.vla
        if vla.checkpoint is None or Path(vla.checkpoint).is_dir():  # a missing one is named when the policy is built
            self.chunking.check(vla.model_chunk_size())
