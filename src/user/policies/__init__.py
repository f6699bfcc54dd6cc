"""Policies: what a robot site runs (`act(obs) -> action`, flat weights in and out, a version)."""

from user.policies.base import FlatWeights, Policy, PolicyError, PolicyInput, TensorObs, WeightSpec
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.preprocess import ObservationConfig

__all__ = [
    "FlatWeights",
    "MLPPolicy",
    "MLPPolicyConfig",
    "ObservationConfig",
    "Policy",
    "PolicyError",
    "PolicyInput",
    "TensorObs",
    "WeightSpec",
]
