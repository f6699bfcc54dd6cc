"""Critic ensembles: shapes, nn.Linear-like initialisation, each member an MLP of its own, the LayerNorm option,
per-member independence, reuse of encoder features."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.algorithms.critics import EnsembleLayerNorm, EnsembleLinear, EnsembleQ
from user.policies.base import Encoder, TensorObs
from user.policies.mlp import StateEncoder


class LinearEncoder(Encoder):
    """An encoder with parameters (like a CNN's), counting its calls."""

    def __init__(self, state_dim: int, out: int) -> None:
        super().__init__()
        self.out_features = out
        self.linear = nn.Linear(state_dim, out)
        self.calls = 0

    def forward(self, obs: TensorObs) -> torch.Tensor:
        self.calls += 1
        out: torch.Tensor = self.linear(obs.state)
        return out


def _inputs(b: int = 5, state_dim: int = 3, action_dim: int = 2, seed: int = 0) -> tuple[TensorObs, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return TensorObs(torch.randn(b, state_dim, generator=g)), torch.rand(b, action_dim, generator=g) * 2 - 1


def _randomise_norms(q: EnsembleQ, seed: int = 1) -> None:
    """Give every LayerNorm member its own non-trivial affine, so that mixing members up would show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in q.net:
            if isinstance(layer, EnsembleLayerNorm):
                layer.weight.copy_(torch.rand(layer.weight.shape, generator=g) + 0.5)
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=g))


def _member_reference(q: EnsembleQ, n: int, obs: TensorObs, action: torch.Tensor) -> torch.Tensor:
    """Member n's Q values computed as a plain per-member MLP: linear, [LayerNorm,] ReLU, ..., linear."""
    x = torch.cat([q.encoder(obs), action], dim=-1)
    for layer in q.net:
        if isinstance(layer, EnsembleLinear):
            x = x @ layer.weight[n] + layer.bias[n, 0]
        elif isinstance(layer, EnsembleLayerNorm):
            x = F.layer_norm(x, (x.shape[-1],), weight=layer.weight[n, 0], bias=layer.bias[n, 0], eps=1e-5)
        else:
            x = torch.relu(x)
    return x.squeeze(-1)


@pytest.mark.parametrize(("members", "batch"), [(1, 1), (3, 5)])
def test_ensemble_q_gives_one_value_per_member_and_row(members: int, batch: int) -> None:
    torch.manual_seed(0)
    q = EnsembleQ(StateEncoder(3), 3, 2, members, (8, 6), layer_norm=False)
    obs, action = _inputs(batch)
    assert q(obs, action).shape == (members, batch)
    assert q.members == members


def test_ensemble_linear_is_initialised_like_nn_linear() -> None:
    torch.manual_seed(0)
    layer = EnsembleLinear(4, 16, 32)
    assert layer.weight.shape == (4, 16, 32) and layer.bias.shape == (4, 1, 32)
    bound = 1.0 / math.sqrt(16)  # nn.Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases
    for p in (layer.weight.detach(), layer.bias.detach()):
        assert float(p.abs().max()) <= bound
        assert float(p.max()) > 0.8 * bound and float(p.min()) < -0.8 * bound  # spread over the whole range
    assert not torch.equal(layer.weight[0], layer.weight[1])  # each member drawn on its own


@pytest.mark.parametrize("shape", [(3, 4), (4, 3, 4), (2, 3, 4)])
def test_ensemble_linear_needs_one_input_slice_per_member(shape: tuple[int, ...]) -> None:
    layer = EnsembleLinear(3, 4, 5)
    assert layer(torch.zeros(3, 7, 4)).shape == (3, 7, 5)
    with pytest.raises(AssertionError):  # no silent broadcasting of one member's inputs to all (or of too many)
        layer(torch.zeros(shape))


@pytest.mark.parametrize("layer_norm", [False, True])
def test_each_member_is_an_mlp_of_its_own_weights(layer_norm: bool) -> None:
    torch.manual_seed(0)
    q = EnsembleQ(StateEncoder(3), 3, 2, members=3, hidden=(8, 6), layer_norm=layer_norm)
    _randomise_norms(q)
    obs, action = _inputs(5)
    values = q(obs, action)
    for n in range(3):
        assert torch.allclose(values[n], _member_reference(q, n, obs, action), atol=1e-5)
    assert not torch.allclose(values[0], values[1])  # independently initialised members disagree


def test_layer_norm_option_puts_a_norm_after_every_hidden_linear_layer() -> None:
    plain = EnsembleQ(StateEncoder(3), 3, 2, members=2, hidden=(8, 6), layer_norm=False)
    normed = EnsembleQ(StateEncoder(3), 3, 2, members=2, hidden=(8, 6), layer_norm=True)
    kinds = [type(m).__name__ for m in plain.net]
    assert kinds == ["EnsembleLinear", "ReLU", "EnsembleLinear", "ReLU", "EnsembleLinear"]
    kinds = [type(m).__name__ for m in normed.net]
    assert kinds == [
        *("EnsembleLinear", "EnsembleLayerNorm", "ReLU"),
        *("EnsembleLinear", "EnsembleLayerNorm", "ReLU"),
        "EnsembleLinear",
    ]
    widths = [tuple(m.weight.shape) for m in normed.net if isinstance(m, EnsembleLinear | EnsembleLayerNorm)]
    assert widths == [(2, 5, 8), (2, 1, 8), (2, 8, 6), (2, 1, 6), (2, 6, 1)]


def test_ensemble_layer_norm_matches_torch_layer_norm_per_member() -> None:
    norm = EnsembleLayerNorm(3, 4)
    g = torch.Generator().manual_seed(0)
    # nearly constant features too, where the epsilon decides the result
    x = torch.cat([torch.randn(3, 2, 4, generator=g), 1.0 + 1e-3 * torch.randn(3, 2, 4, generator=g)], dim=1)
    reference = F.layer_norm(x, (4,))  # a fresh norm is the identity affine: torch's LayerNorm, eps 1e-5
    assert torch.allclose(norm(x), reference, atol=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(3, 1, 4, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(3, 1, 4, generator=g))
    out = norm(x)
    for n in range(3):
        torch_norm = nn.LayerNorm(4)
        with torch.no_grad():
            torch_norm.weight.copy_(norm.weight[n, 0])
            torch_norm.bias.copy_(norm.bias[n, 0])
        assert torch.allclose(out[n], torch_norm(x[n]), atol=1e-6)


@pytest.mark.parametrize("member", [0, 2])
def test_a_member_depends_only_on_its_own_parameters(member: int) -> None:
    torch.manual_seed(0)
    q = EnsembleQ(StateEncoder(3), 3, 2, members=3, hidden=(8, 6), layer_norm=True)
    _randomise_norms(q)
    obs, action = _inputs(5)
    q(obs, action)[member].sum().backward()
    for name, p in q.net.named_parameters():
        assert p.grad is not None, name
        per_member = p.grad.abs().flatten(1).sum(dim=1)
        others = [float(per_member[n]) for n in range(3) if n != member]
        assert float(per_member[member]) > 0 and others == [0.0, 0.0], name


def test_given_features_replace_the_encoder() -> None:
    torch.manual_seed(0)
    encoder = LinearEncoder(3, 4)
    q = EnsembleQ(encoder, 4, 2, members=2, hidden=(8,), layer_norm=False)
    obs, action = _inputs(5)
    computed = q(obs, action)
    assert encoder.calls == 1
    features = encoder(obs).detach()
    calls = encoder.calls
    assert torch.allclose(q(obs, action, features=features), computed)
    assert encoder.calls == calls  # the encoder is not run again
    assert not torch.allclose(q(obs, action, features=features + 1.0), computed)
