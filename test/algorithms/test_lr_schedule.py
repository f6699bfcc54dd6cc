"""Learning-rate schedules: the cosine curve, BC's optimizer following it step by step, a resume continuing it."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from test.algorithms.factories import fixed_batch, through_file
from user.algorithms.bc import BC, BCConfig
from user.algorithms.lr_schedule import cosine_rate
from user.config import ConfigError
from user.config.strict import from_mapping
from user.policies.mlp import MLPPolicy, MLPPolicyConfig


def _policy() -> MLPPolicy:
    return MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2, hidden=(16,), seed=1))


def test_the_cosine_curve() -> None:
    rate = [cosine_rate(1e-5, k, warmup_steps=2, decay_steps=4, final_fraction=0.1) for k in range(9)]
    assert rate[:2] == pytest.approx([1e-5 / 3, 2e-5 / 3])  # warming up
    assert rate[2] == pytest.approx(1e-5)  # the peak, then half a cosine down
    assert rate[4] == pytest.approx(1e-6 + 9e-6 * 0.5 * (1 + math.cos(math.pi / 2)))
    assert rate[6:] == pytest.approx([1e-6] * 3)  # flat at the final rate
    assert all(a >= b for a, b in itertools.pairwise(rate[2:]))


def test_bc_steps_at_the_scheduled_rate_and_resumes_on_it(tmp_path: Path) -> None:
    config = BCConfig(lr=1e-3, lr_schedule="cosine", warmup_steps=1, decay_steps=4, final_lr_fraction=0.0)
    bc = BC(_policy(), config)
    batch = fixed_batch(16)
    seen = [bc.update(batch).info["lr"] for _ in range(3)]
    assert seen == pytest.approx([config.rate(k) for k in range(3)])
    assert bc.optim.param_groups[0]["lr"] == pytest.approx(config.rate(2))
    again = BC(_policy(), config)
    through_file(bc, again, tmp_path / "bc.pt")
    assert again.update(batch).info["lr"] == pytest.approx(cosine_rate(1e-3, 3, 1, 4, 0.0))
    constant = BC(_policy(), BCConfig(lr=2e-4))
    assert "lr" not in constant.update(batch).info  # a constant rate: the stats as before
    assert constant.optim.param_groups[0]["lr"] == 2e-4


def test_cosine_settings_belong_to_the_cosine_schedule() -> None:
    loaded = from_mapping(BCConfig, {"lr": 1e-5, "lr_schedule": "cosine", "decay_steps": 100}, where="bc")
    assert loaded.rate(100) == pytest.approx(1e-6)
    with pytest.raises(ConfigError, match="decay_steps"):
        from_mapping(BCConfig, {"lr_schedule": "constant", "decay_steps": 100}, where="bc")
    with pytest.raises(ConfigError, match="lr_schedule"):
        from_mapping(BCConfig, {"lr_schedule": "linear"}, where="bc")
