"""Algorithms: what only the learner holds (`update(batch) -> TrainingStats`, checkpoint state), and the table of
the kinds a learner selects by name (`ALGORITHMS`), each a settings class that builds its algorithm."""

from user.algorithms.base import Algorithm, AlgorithmConfig, AlgorithmError, TorchBatch, TrainingStats, to_torch
from user.algorithms.bc import BC, BCConfig
from user.algorithms.hg_dagger import HGDagger, HGDaggerConfig
from user.algorithms.registry import ALGORITHMS
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.algorithms.sac_flow import SACFlow, SACFlowConfig

__all__ = [
    "ALGORITHMS",
    "BC",
    "RLPD",
    "SAC",
    "Algorithm",
    "AlgorithmConfig",
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
