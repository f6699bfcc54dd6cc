"""`MLPPolicy`: state in, tanh-Gaussian action out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from user.config import setting
from user.policies.base import Encoder, PolicyError, TensorObs
from user.policies.gaussian import GaussianActor, GaussianPolicy, TanhGaussianHead, mlp
from user.policies.preprocess import ObservationConfig, normalise_state


@dataclass(frozen=True)
class MLPPolicyConfig:
    """An MLP policy on the state vector."""

    state_dim: int = setting(3, "length of the state vector", min=1)
    action_dim: int = setting(1, "length of the action vector (actions are in [-1, 1])", min=1)
    hidden: tuple[int, ...] = setting((256, 256), "widths of the hidden layers")
    layer_norm: bool = setting(False, "LayerNorm after each hidden linear layer")
    log_std_min: float = setting(-5.0, "lower bound of the Gaussian's log standard deviation")
    log_std_max: float = setting(2.0, "upper bound of the Gaussian's log standard deviation")
    observation: ObservationConfig = setting(
        ObservationConfig(image_size=None), "state normalisation (images are not used)"
    )
    seed: int = setting(0, "seed of the parameter initialisation")


class StateEncoder(Encoder):
    """TensorObs -> its state (B, S): the 'encoder' of state-only networks."""

    def __init__(self, state_dim: int) -> None:
        super().__init__()
        self.out_features = state_dim

    def forward(self, obs: TensorObs) -> torch.Tensor:
        if obs.state.shape[-1] != self.out_features:
            raise PolicyError(f"state has {obs.state.shape[-1]} entries, the policy expects {self.out_features}")
        return obs.state


class MLPPolicy(GaussianPolicy):
    """MLP on the (normalised) state with a tanh-squashed Gaussian head."""

    def __init__(self, config: MLPPolicyConfig) -> None:
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            trunk = mlp((config.state_dim, *config.hidden), layer_norm=config.layer_norm)
            width = config.hidden[-1] if config.hidden else config.state_dim
            head = TanhGaussianHead(width, config.action_dim, config.log_std_min, config.log_std_max)
        super().__init__(GaussianActor(StateEncoder(config.state_dim), trunk, head), config.action_dim)

    def preprocess(self, state: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> TensorObs:
        del images
        return TensorObs(normalise_state(state, self.config.observation))

    def encoder(self) -> Encoder:
        return StateEncoder(self.config.state_dim)
