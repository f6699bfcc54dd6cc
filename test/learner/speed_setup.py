"""A tiny image RLPD/SAC setup and fixed batches for the speed tests (two 16x16 cameras, a thin ResNet)."""

from __future__ import annotations

import numpy as np

from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.buffer.batch import TransitionBatch
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

CAMERAS = ("left", "right")


def tiny_policy(seed: int = 0) -> CNNPolicy:
    encoder = ImageEncoderConfig(channels=(4, 4, 8, 8), stem_channels=4, groups=2, spatial_features=2, bottleneck=8)
    return CNNPolicy(
        CNNPolicyConfig(
            state_dim=3,
            action_dim=2,
            observation=ObservationConfig(cameras=CAMERAS, image_size=16),
            encoder=encoder,
            hidden=(16,),
            seed=seed,
        )
    )


def tiny_algorithm(kind: str, seed: int = 0) -> SAC:
    policy = tiny_policy(seed)
    if kind == "rlpd":
        return RLPD(policy, RLPDConfig(num_critics=4, critic_hidden=(16,), batch_size=8), seed=seed)
    return SAC(policy, SACConfig(num_critics=4, critic_hidden=(16,), batch_size=8), seed=seed)


def host_batch(n: int = 8, seed: int = 0) -> TransitionBatch:
    rng = np.random.default_rng(seed)

    def pixels() -> dict[str, np.ndarray]:
        return {c: rng.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8) for c in CAMERAS}

    return TransitionBatch(
        indices=np.arange(n, dtype=np.int64),
        state=rng.standard_normal((n, 3)).astype(np.float32),
        action=rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        reward=rng.standard_normal(n).astype(np.float32),
        next_state=rng.standard_normal((n, 3)).astype(np.float32),
        terminated=np.arange(n) % 4 == 0,
        truncated=np.zeros(n, dtype=bool),
        success=np.zeros(n, dtype=bool),
        is_demo=np.arange(n) % 2 == 0,
        intervened=np.zeros(n, dtype=bool),
        policy_version=np.zeros(n, dtype=np.int64),
        images=pixels(),
        next_images=pixels(),
    )
