"""Policies: what a robot site runs (`act(obs) -> action`, flat weights in and out, a version)."""

from user.policies.base import FlatWeights, Policy, PolicyError, PolicyInput, TensorObs, WeightSpec
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.flow import FlowPolicy, FlowPolicyConfig
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

__all__ = [
    "CNNPolicy",
    "CNNPolicyConfig",
    "FlatWeights",
    "FlowPolicy",
    "FlowPolicyConfig",
    "ImageEncoderConfig",
    "MLPPolicy",
    "MLPPolicyConfig",
    "ObservationConfig",
    "Policy",
    "PolicyError",
    "PolicyInput",
    "TensorObs",
    "WeightSpec",
]
