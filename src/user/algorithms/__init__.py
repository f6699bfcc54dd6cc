"""Algorithms: what only the learner holds (`update(batch) -> TrainingStats`, checkpoint state)."""

from user.algorithms.base import Algorithm, AlgorithmError, TorchBatch, TrainingStats, to_torch
from user.algorithms.bc import BC, BCConfig
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.algorithms.sac_flow import SACFlow, SACFlowConfig

__all__ = [
    "BC",
    "RLPD",
    "SAC",
    "Algorithm",
    "AlgorithmError",
    "BCConfig",
    "HGDagger",
    "HGDaggerConfig",
    "RLPDConfig",
    "SACConfig",
    "SACFlow",
    "SACFlowConfig",
    "TorchBatch",
    "TrainingStats",
    "to_torch",
]
