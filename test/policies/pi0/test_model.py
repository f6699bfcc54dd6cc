"""The π0 model: chunked flow-matching loss (overfits one batch, padded steps masked out), the cached sampler."""

from __future__ import annotations

import pytest
import torch

from test.policies.pi0.conftest import make_batch, make_chunk
from user.policies.pi0 import TEST_SIZE, Pi0Error, Pi0Model


def test_the_test_size_is_small(model: Pi0Model) -> None:
    assert 1e6 < sum(p.numel() for p in model.parameters()) < 5e6  # a few million


def test_the_loss_falls_to_near_zero_overfitting_one_batch(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    obs, actions = make_batch(tokenizer, batch=4), make_chunk(batch=4)
    mask = torch.ones(4, TEST_SIZE.chunk_size, dtype=torch.bool)
    mask[0, 2:] = False  # an episode ending inside the chunk
    noise, time = torch.randn_like(actions), torch.rand(4)  # one fixed draw: one batch to memorise
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    first = last = None
    for _ in range(150):
        loss, info = model.chunk_loss(obs, actions, mask, noise=noise, time=time)
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        first = first if first is not None else info["flow_mse"]
        last = info["flow_mse"]
        if last < 1e-3 * first:
            break
    assert first is not None and last is not None
    assert first > 0.5 and last < 1e-3 * first, (first, last)


def test_a_masked_step_changes_neither_the_loss_nor_the_gradient(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    obs, actions = make_batch(tokenizer), make_chunk()
    mask = torch.ones(actions.shape[:2], dtype=torch.bool)
    mask[1, -2:] = False
    noise, time = torch.randn_like(actions), torch.rand(3)

    def loss_and_grads(chunk: torch.Tensor, eps: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss, _ = model.chunk_loss(obs, chunk, mask, noise=eps, time=time)
        loss.backward()  # type: ignore[no-untyped-call]
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    base, grads = loss_and_grads(actions, noise)
    changed, other_noise = actions.clone(), noise.clone()
    changed[1, -2:] = 5.0  # garbage past the episode's end
    other_noise[1, -2:] = -3.0
    loss, other = loss_and_grads(changed, other_noise)
    assert torch.allclose(loss, base, rtol=1e-6, atol=1e-7)
    assert len(grads) == len(other)
    for g0, g1 in zip(grads, other, strict=True):
        torch.testing.assert_close(g1, g0, rtol=1e-5, atol=1e-7)
    changed[1, 0] = 5.0  # a valid step does change it
    assert not torch.allclose(loss_and_grads(changed, other_noise)[0], base)


def test_one_euler_step_is_noise_minus_the_velocity_at_t1(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    """The cached sampler (prefix once, suffix per step) agrees with the joint training pass, and runs t 1 -> 0."""
    obs = make_batch(tokenizer)
    noise = torch.randn(3, TEST_SIZE.chunk_size, TEST_SIZE.action_dim)
    every = torch.ones(3, TEST_SIZE.chunk_size, dtype=torch.bool)
    with torch.no_grad():
        velocity = model.velocity(obs, noise, torch.ones(3), every)
        chunk = model.sample_chunk(obs, noise=noise, steps=1)
    torch.testing.assert_close(chunk, noise - velocity, rtol=1e-5, atol=1e-5)
    assert model.sample_chunk(obs).shape == (3, TEST_SIZE.chunk_size, TEST_SIZE.action_dim)


def test_bad_inputs_are_named(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    obs, actions = make_batch(tokenizer), make_chunk()
    mask = torch.ones(actions.shape[:2], dtype=torch.bool)
    with pytest.raises(Pi0Error, match=r"actions must be \(B, H, A\)"):
        model.chunk_loss(obs, actions[:, :2], mask)
    with pytest.raises(Pi0Error, match="chunk mask must be bool"):
        model.chunk_loss(obs, actions, mask.float())
    with pytest.raises(Pi0Error, match="no step as valid"):
        model.chunk_loss(obs, actions, torch.zeros_like(mask))
    with pytest.raises(Pi0Error, match="state must be"):
        model.sample_chunk(obs._replace(state=obs.state[:, :2]))
    with pytest.raises(Pi0Error, match="camera 'front'"):
        model.sample_chunk(obs._replace(images=(obs.images[0][:, :, :8],)))
