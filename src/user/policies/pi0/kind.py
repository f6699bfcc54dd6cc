"""The `vla` policy kind (`learning.policy_kind: vla`): a π0-shaped model behind `VLAPolicy`, built the same on the
learner and on every rollout, so the flat weights the learner publishes fit the policy a robot site runs.

The model is either the one of a local checkpoint directory (`checkpoint`, written by `Pi0VLA.save`; read from disk
only, never from a hub) or a fresh test-sized one (`size: test`), its weights drawn from `seed` (learner and rollouts
draw the same) and its tokenizer a word-level one trained on the instruction (the same on every side).
transformers, safetensors and tokenizers (the `vla` extra) are imported only when a model is built.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from typing import Literal

import torch

from user.config import ConfigError, setting
from user.policies.base import PolicyError
from user.policies.pi0.checkpoint import stored_config
from user.policies.pi0.config import TEST_SIZE
from user.policies.pi0.errors import Pi0Error
from user.policies.pi0.model import Pi0Model
from user.policies.pi0.tokenizer import tokenize, train_word_tokenizer
from user.policies.pi0.vla import Pi0VLA
from user.policies.preprocess import ObservationConfig
from user.policies.vla import VLAPolicy, VLAPolicyConfig

SIGLIP_MEAN_STD = (0.5, 0.5, 0.5)  # pixels in [0, 1] become [-1, 1], as SigLIP takes them
EXTRA = ("transformers", "safetensors", "tokenizers")  # the `vla` extra of pyproject.toml


@dataclass(frozen=True)
class VLAKindConfig(VLAPolicyConfig):
    """policy_kind vla: the π0 model (a checkpoint directory, or `size: test`), the robot's state and action
    dimensions, and how the policy drives the model (instruction, execute_horizon, observation)."""

    observation: ObservationConfig = setting(
        ObservationConfig(cameras=("front",), image_size=224, image_mean=SIGLIP_MEAN_STD, image_std=SIGLIP_MEAN_STD),
        "cameras given to the model (every camera it looks at) and their preprocessing; image_mean and image_std "
        "must be 0.5 (pixels in [-1, 1])",
    )
    checkpoint: str | None = setting(
        None,
        "a local π0 checkpoint directory written by Pi0VLA.save (model.safetensors, config.json, tokenizer files); "
        "read from disk only, never a hub. Give this or size",
    )
    size: Literal["test"] | None = setting(
        None, "instead of a checkpoint, a fresh model of this size: test (a few million parameters, trains on CPUs)"
    )
    seed: int = setting(
        0, "size test: seed of the fresh weights (the learner and every rollout draw the same)", when=("size", "test")
    )
    chunk_size: int = setting(
        TEST_SIZE.chunk_size,
        "size test: H, actions per chunk (the learner's buffer.chunk_horizon must equal it)",
        min=1,
        when=("size", "test"),
    )
    state_dim: int = setting(
        TEST_SIZE.state_dim, "the robot's state vector (at most the model's state_dim; zero-padded to it)", min=1
    )
    action_dim: int = setting(
        TEST_SIZE.action_dim, "the robot's action vector (the first dims of the model's actions)", min=1
    )

    def __post_init__(self) -> None:
        if (self.checkpoint is None) == (self.size is None):
            given = "both" if self.size is not None else "neither"
            raise ConfigError(f"give checkpoint (a local π0 checkpoint directory) or size: test, not {given}")
        if self.checkpoint is not None and not self.checkpoint.strip():
            raise ConfigError("checkpoint is empty: give the path of a local π0 checkpoint directory")
        if not self.observation.cameras:
            raise ConfigError("observation.cameras is empty: π0 looks at one camera image at least")
        obs = self.observation
        if obs.image_mean != SIGLIP_MEAN_STD or obs.image_std != SIGLIP_MEAN_STD:
            raise ConfigError(
                f"observation.image_mean {obs.image_mean} and image_std {obs.image_std} must be 0.5 each: "
                "π0's SigLIP takes pixels in [-1, 1]"
            )
        if self.size is not None and self.execute_horizon > self.chunk_size:
            raise ConfigError(f"execute_horizon {self.execute_horizon} exceeds chunk_size {self.chunk_size}")

    def model_chunk_size(self) -> int:
        """H of the model this section builds (a checkpoint's is read from its config.json)."""
        if self.checkpoint is None:
            return self.chunk_size
        try:
            return stored_config(self.checkpoint).chunk_size
        except Pi0Error as exc:
            raise ConfigError(f"vla.checkpoint: {exc}") from None


def build_vla_policy(config: VLAKindConfig) -> VLAPolicy:
    """The policy of a `vla` section: the same weights wherever it is built (the checkpoint's, or drawn from the
    seed). A missing extra, checkpoint or file, or a model that does not fit the robot, is one `ConfigError`."""
    missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"policy_kind vla needs {', '.join(missing)}: install the package's `vla` extra (transformers, "
            "safetensors, tokenizers)"
        )
    model = _fresh(config) if config.checkpoint is None else _from_checkpoint(config, config.checkpoint)
    try:
        tokenize(model.tokenizer, [config.instruction], model.model.config.max_tokens, torch.device("cpu"))
        return VLAPolicy(model, config)
    except PolicyError as exc:  # Pi0Error too: an instruction too long, a horizon past the chunk
        raise ConfigError(f"vla: {exc}") from None


def _from_checkpoint(config: VLAKindConfig, directory: str) -> Pi0VLA:
    try:
        model = Pi0VLA.load(directory, state_dim=config.state_dim, action_dim=config.action_dim)
    except Pi0Error as exc:  # CheckpointError names the file
        raise ConfigError(f"vla.checkpoint: {exc}") from None
    lacking = [c for c in model.model.config.cameras if c not in config.observation.cameras]
    if lacking:
        raise ConfigError(
            f"vla.observation.cameras {list(config.observation.cameras)} lacks {lacking}: the checkpoint's model "
            f"looks at {list(model.model.config.cameras)}"
        )
    return model


def _fresh(config: VLAKindConfig) -> Pi0VLA:
    """A test-sized model for exactly this robot and these cameras, its weights drawn from the seed."""
    try:
        size = replace(
            TEST_SIZE,
            cameras=config.observation.cameras,
            state_dim=config.state_dim,
            action_dim=config.action_dim,
            chunk_size=config.chunk_size,
        )
        tokenizer = train_word_tokenizer([config.instruction])
        tokens = len(tokenizer(config.instruction)["input_ids"])
        size = replace(size, max_tokens=max(size.max_tokens, tokens))  # the instruction fits
        with torch.random.fork_rng(devices=[]):  # the global draws are left as they were
            torch.manual_seed(config.seed)
            model = Pi0Model(size)
        return Pi0VLA(model, tokenizer)
    except Pi0Error as exc:
        raise ConfigError(f"vla: {exc}") from None
