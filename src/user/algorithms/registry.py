"""The algorithm kinds a learner selects by name (`learning.algorithm`): the one table of them, each name beside
the settings class that builds its algorithm (`AlgorithmConfig`). `user.learner.config.LearningConfig` holds one
section per kind, named after it; its tests fail when the `algorithm` choices, the sections and this table differ."""

from __future__ import annotations

from user.algorithms.base import AlgorithmConfig
from user.algorithms.hg_dagger import HGDaggerConfig
from user.algorithms.rlpd import RLPDConfig
from user.algorithms.sac import SACConfig
from user.algorithms.sac_flow import SACFlowConfig

ALGORITHMS: dict[str, type[AlgorithmConfig]] = {
    "rlpd": RLPDConfig,
    "sac": SACConfig,
    "sac_flow": SACFlowConfig,
    "hg_dagger": HGDaggerConfig,
}
