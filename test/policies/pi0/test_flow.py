"""Flow matching in π0's convention: x_t = t noise + (1 - t) actions, u = noise - actions, t from 1 to 0."""

from __future__ import annotations

import math

import pytest
import torch

from user.policies.pi0.errors import Pi0Error
from user.policies.pi0.flow import T_MIN, euler, interpolate, masked_mse, sample_time, time_embedding


def test_interpolation_runs_from_actions_at_0_to_noise_at_1() -> None:
    actions, noise = torch.ones(2, 3, 1), -torch.ones(2, 3, 1)
    x, u = interpolate(actions, noise, torch.tensor([0.0, 1.0]))
    assert torch.equal(x[0], actions[0]) and torch.equal(x[1], noise[1])
    assert torch.equal(u, noise - actions)


def test_euler_integrates_from_noise_to_the_chunk() -> None:
    """With the exact velocity of a straight path (noise - a), K steps from noise land on a."""
    a, noise = torch.randn(2, 4, 3), torch.randn(2, 4, 3)
    seen: list[float] = []

    def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        seen.append(float(t[0]))
        return noise - a

    torch.testing.assert_close(euler(velocity, noise, 5), a)
    assert seen == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    with pytest.raises(Pi0Error):
        euler(velocity, noise, 0)


def test_time_embedding_and_draws() -> None:
    e = time_embedding(torch.tensor([0.0, 0.25]), 8, 4e-3, 4.0)
    assert e.shape == (2, 8) and torch.equal(e[0], torch.tensor([0.0] * 4 + [1.0] * 4))
    assert e[1, 3] == pytest.approx(math.sin(2 * math.pi * 0.25 / 4.0), abs=1e-6)  # the longest period last
    t = sample_time(4000, (1.5, 1.0), torch.device("cpu"))
    assert float(t.min()) >= T_MIN and float(t.max()) <= 1.0
    assert float(t.mean()) == pytest.approx(0.001 + 0.999 * 0.6, abs=0.02)  # Beta(1.5, 1) has mean 0.6


def test_masked_mse_counts_valid_steps_only() -> None:
    v, u = torch.zeros(1, 2, 2), torch.tensor([[[1.0, 1.0], [9.0, 9.0]]])
    assert float(masked_mse(v, u, torch.tensor([[True, False]]))) == 1.0
    with pytest.raises(Pi0Error, match="no step as valid"):
        masked_mse(v, u, torch.tensor([[False, False]]))
