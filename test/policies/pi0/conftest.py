"""Fixtures of the π0 tests: a word-level tokenizer trained here, the test-sized model, one small batch."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="the π0 model needs the `vla` extra (scripts/install --ros has it)")

from transformers import PreTrainedTokenizerFast

from user.policies.pi0 import TEST_SIZE, Pi0Model, Pi0Observation, tokenize, train_word_tokenizer

SENTENCES = ("pick up the red cube", "insert the peg into the hole", "open the drawer", "push the blue block left")


@pytest.fixture
def tokenizer() -> PreTrainedTokenizerFast:
    return train_word_tokenizer(SENTENCES)


@pytest.fixture
def model() -> Pi0Model:
    torch.manual_seed(0)
    return Pi0Model(TEST_SIZE)


def make_batch(tokenizer: PreTrainedTokenizerFast, batch: int = 3, seed: int = 0) -> Pi0Observation:
    """`batch` observations of the test-sized model, instructions of different lengths."""
    gen = torch.Generator().manual_seed(seed)
    cfg = TEST_SIZE
    side = cfg.vision.image_size
    images = tuple(torch.rand(batch, 3, side, side, generator=gen) * 2 - 1 for _ in cfg.cameras)
    tokens = tokenize(
        tokenizer, [SENTENCES[i % len(SENTENCES)] for i in range(batch)], cfg.max_tokens, torch.device("cpu")
    )
    return Pi0Observation(images, torch.randn(batch, cfg.state_dim, generator=gen), tokens.ids, tokens.mask)


def make_chunk(batch: int = 3, seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(batch, TEST_SIZE.chunk_size, TEST_SIZE.action_dim, generator=gen) * 2 - 1
