"""Real-time chunking: the soft mask, the guidance weight, a guided chunk that continues the previous one, and the
plain sampler back when there is nothing to continue."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from test.policies.pi0.conftest import SENTENCES, make_batch
from user.config import ConfigError
from user.policies.pi0 import TEST_SIZE, Pi0Error, Pi0Model, Pi0Observation, train_word_tokenizer
from user.policies.pi0.rtc import RtcConfig, guidance_weight, sample_continuing, soft_mask

H = 8  # a chunk long enough for a delay, an overlap and an execution horizon
SIZE = replace(TEST_SIZE, chunk_size=H)
A = SIZE.action_dim


@pytest.fixture(scope="module")
def rtc_model() -> Pi0Model:
    torch.manual_seed(0)
    return Pi0Model(SIZE).eval()


@pytest.fixture(scope="module")
def obs() -> Pi0Observation:
    return make_batch(train_word_tokenizer(SENTENCES), batch=2)


def draws(remaining: int = 6, seed: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """(noise (2, H, A), the previous chunk's `remaining` actions (2, remaining, A) in [-1, 1])."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, H, A, generator=gen), torch.rand(2, remaining, A, generator=gen) * 2 - 1


def test_the_soft_mask_is_one_over_the_delay_decays_over_the_overlap_and_is_zero_at_the_end() -> None:
    linear = soft_mask(2, 4, 10, "linear")  # the reference's example: start 2, end 6, total 10
    torch.testing.assert_close(linear, torch.tensor([1, 1, 4 / 5, 3 / 5, 2 / 5, 1 / 5, 0, 0, 0, 0]))
    exp = soft_mask(2, 4, 10, "exp")
    c = linear[2:6].double()
    torch.testing.assert_close(exp[2:6].double(), c * torch.expm1(c) / (math.e - 1), rtol=1e-6, atol=1e-7)
    assert exp.dtype == torch.float32 and exp.shape == (10,)
    assert exp[:2].tolist() == [1.0, 1.0] and exp[6:].tolist() == [0.0] * 4
    assert bool((exp[1:] <= exp[:-1]).all()) and bool((exp[2:6] < linear[2:6]).all())
    assert soft_mask(2, 4, 10, "ones").tolist() == [1.0] * 6 + [0.0] * 4
    assert soft_mask(2, 4, 10, "zeros").tolist() == [1.0] * 2 + [0.0] * 8
    assert 0 < float(soft_mask(0, 2, 8)[0]) < 1  # no delay: even the first action may change
    assert not bool(soft_mask(0, 8, 8).any())  # s = H: nothing to continue


def test_bad_mask_arguments_are_named() -> None:
    with pytest.raises(Pi0Error, match="inference delay -1"):
        soft_mask(-1, 2, 8)
    with pytest.raises(Pi0Error, match=r"inference delay 7 .*chunk_size - execute_horizon = 6"):
        soft_mask(7, 2, 8)
    with pytest.raises(Pi0Error, match="inference delay True"):
        soft_mask(True, 2, 8)  # a bool is no delay
    with pytest.raises(Pi0Error, match=r"execute_horizon 9 must lie in \[0, chunk_size 8\]"):
        soft_mask(0, 9, 8)
    with pytest.raises(Pi0Error, match="schedule 'cubic'"):
        soft_mask(0, 2, 8, "cubic")  # type: ignore[arg-type]


def test_the_guidance_weight_follows_the_paper_and_is_clipped() -> None:
    t = torch.tensor([1.0, 0.9, 0.5, 0.25, 1e-3])
    paper_tau = 1 - t.double()  # the paper's time runs from noise (0) to data (1)
    r2 = (1 - paper_tau) ** 2 / (paper_tau**2 + (1 - paper_tau) ** 2)
    expected = ((1 - paper_tau) / (paper_tau * r2)).clamp(max=5.0)  # +inf at pure noise: clipped
    torch.testing.assert_close(guidance_weight(t, 5.0).double(), expected, rtol=1e-6, atol=0)
    assert guidance_weight(t, 5.0).tolist()[:3] == [5.0, 5.0, 2.0]
    assert guidance_weight(t, 1.0).tolist() == [1.0] * 5


def test_a_guided_chunk_continues_the_actions_executed_during_the_delay(rtc_model: Pi0Model, obs) -> None:  # type: ignore[no-untyped-def]
    noise, previous = draws()
    delay, config = 3, RtcConfig(execute_horizon=2)
    plain = rtc_model.sample_chunk(obs, noise=noise)
    guided = sample_continuing(rtc_model, obs, previous, delay, config, noise=noise)
    assert guided.shape == (2, H, A) and guided.dtype == torch.float32 and not guided.requires_grad
    plain_error = (plain[:, :delay] - previous[:, :delay]).abs().max()
    guided_error = (guided[:, :delay] - previous[:, :delay]).abs().max()
    assert plain_error > 0.5, plain_error  # the unguided chunk goes its own way
    assert guided_error < plain_error / 10, (float(guided_error), float(plain_error))
    overlap = slice(delay, H - config.execute_horizon)  # softly pulled: closer than unguided
    target = previous[:, overlap]
    assert (guided[:, overlap] - target).abs().mean() < (plain[:, overlap] - target).abs().mean()


def test_with_nothing_to_continue_it_is_the_plain_sampler(rtc_model: Pi0Model, obs) -> None:  # type: ignore[no-untyped-def]
    noise, previous = draws()
    plain = rtc_model.sample_chunk(obs, noise=noise)
    config = RtcConfig(execute_horizon=2)
    assert torch.equal(sample_continuing(rtc_model, obs, None, 0, config, noise=noise), plain)
    off = replace(config, max_guidance=0.0)
    assert torch.equal(sample_continuing(rtc_model, obs, previous, 3, off, noise=noise), plain)
    everything_new = RtcConfig(execute_horizon=H)  # a mask of zeros
    assert torch.equal(sample_continuing(rtc_model, obs, previous, 0, everything_new, noise=noise), plain)
    assert torch.equal(sample_continuing(rtc_model, obs, previous[:, :0], 0, config, noise=noise), plain)
    torch.manual_seed(7)
    drawn = sample_continuing(rtc_model, obs, None, 0, config)
    torch.manual_seed(7)
    assert torch.equal(drawn, rtc_model.sample_chunk(obs))  # the same draw of noise


def test_only_the_noisy_chunk_is_differentiated_never_the_cached_prefix(rtc_model: Pi0Model, obs) -> None:  # type: ignore[no-untyped-def]
    velocity = rtc_model.cached_velocity(obs)
    x = torch.randn(2, H, A, requires_grad=True)
    v = velocity(x, torch.full((2,), 0.5))
    vision = list(rtc_model.paligemma_with_expert.parameters())
    prefix_only = [p for n, p in rtc_model.named_parameters() if "vision" in n or "embed_tokens" in n]
    assert prefix_only and len(prefix_only) < len(vision)
    assert all(g is None for g in torch.autograd.grad(v.sum(), prefix_only, allow_unused=True))
    assert torch.autograd.grad(v.sum(), x)[0].abs().sum() > 0
    noise, previous = draws()
    sample_continuing(rtc_model, obs, previous, 2, RtcConfig(execute_horizon=2), noise=noise)
    assert all(p.grad is None for p in rtc_model.parameters())


def test_bad_inputs_are_named(rtc_model: Pi0Model, obs) -> None:  # type: ignore[no-untyped-def]
    noise, previous = draws()
    config = RtcConfig(execute_horizon=2)
    cases = [
        (previous[0], 2, config, rf"previous chunk must be \(B, H', {A}\), got \(6, {A}\)"),
        (previous[..., :3], 2, config, r"got \(2, 6, 3\)"),
        (torch.zeros(2, H + 1, A), 2, config, "9 remaining actions, more than the chunk of 8"),
        (previous[:, :1], 2, config, "1 remaining actions but 2 are executed during the delay"),
        (previous.index_put((torch.tensor(0), torch.tensor(1)), torch.tensor(math.nan)), 2, config, "non-finite"),
        (previous.index_put((torch.tensor(1), torch.tensor(0)), torch.tensor(math.inf)), 2, config, "non-finite"),
        (previous[:1], 2, config, "previous chunk has batch 1, the observation 2"),
        (previous, -1, config, "inference delay -1"),
        (previous, 7, config, "inference delay 7"),
        (previous, 0, RtcConfig(execute_horizon=H + 1), "execute_horizon 9 exceeds the model's chunk of 8"),
    ]
    for prev, delay, cfg, message in cases:
        with pytest.raises(Pi0Error, match=message):
            sample_continuing(rtc_model, obs, prev, delay, cfg, noise=noise)
    with pytest.raises(Pi0Error, match="noise must be"):
        sample_continuing(rtc_model, obs, previous, 2, config, noise=noise[:, :2])
    with pytest.raises(Pi0Error, match="inference delay 7"):
        sample_continuing(rtc_model, obs, None, 7, config)  # checked even with nothing to continue
    with pytest.raises(Pi0Error, match="non-finite"):  # checked with guidance off too
        sample_continuing(rtc_model, obs, previous * math.nan, 2, replace(config, max_guidance=0.0), noise=noise)


def test_bad_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="execute_horizon must be 1 or more"):
        RtcConfig(execute_horizon=0)
    with pytest.raises(ConfigError, match="max_guidance must be a finite number >= 0"):
        RtcConfig(max_guidance=math.nan)
    with pytest.raises(ConfigError, match="schedule 'cubic'"):
        RtcConfig(schedule="cubic")  # type: ignore[arg-type]
