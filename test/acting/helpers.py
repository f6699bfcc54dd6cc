"""What the acting tests drive a session with, without a bus: a weight source whose versions the test sets, and
observations of a small MLP policy's layout."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from user.interfaces.domain import Observation
from user.learner.config import LearningConfig
from user.policies.base import FlatWeights
from user.policies.mlp import MLPPolicyConfig
from user.sync.in_use import WeightsInUse

STATE_DIM, ACTION_DIM = 7, 4


def learning() -> LearningConfig:
    mlp = MLPPolicyConfig(state_dim=STATE_DIM, action_dim=ACTION_DIM, hidden=(8,))
    return LearningConfig(mlp=mlp, exclude_state_prefixes=())


def observation(robot: str, episode: int = 0, step: int = 0, state: np.ndarray | None = None) -> Observation:
    values = np.linspace(-0.5, 0.5, STATE_DIM, dtype=np.float32) if state is None else state
    return Observation(robot, "peg_insertion", episode, step, values, 1_000 + step)


class Weights(WeightsInUse):
    """The rollout's weight subscriber as the session sees it (the receivers' reading side): the newest complete
    version, set by the test."""

    def __init__(self) -> None:
        super().__init__(learning().build_policy())
        self.snapshots = 0  # how often a policy copy was made from these weights

    def snapshot(self) -> FlatWeights:
        with self._changed:
            self.snapshots += 1
            return self.policy.get_weights()

    def publish(self, version: int) -> None:
        """Version `version` arrives: new weights (each version's differ), applied at once."""
        with self._changed:
            weights = self.policy.get_weights()
            data = torch.full_like(weights.data, 0.01 * version)
            self.policy.load_weights(replace(weights, data=data, version=version))
            self._changed.notify_all()
