"""Instructions to token ids: a `PreTrainedTokenizerFast` read from the checkpoint directory, and a small local
word-level one for test-sized models (the `tokenizers` library, trained on a few sentences, nothing downloaded).

π0 tokenizes the prompt with PaliGemma's SentencePiece vocabulary; any fast tokenizer with a pad token works
here, as long as its vocabulary fits the model's `vocab_size`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import torch

from user.policies.pi0.errors import Pi0Error

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD, UNK, BOS = "[PAD]", "[UNK]", "[BOS]"


class TokenBatch(NamedTuple):
    """Tokenized instructions."""

    ids: torch.Tensor  # (B, max_tokens) int64
    mask: torch.Tensor  # (B, max_tokens) bool, True for real tokens


def train_word_tokenizer(sentences: Iterable[str]) -> PreTrainedTokenizerFast:
    """A lower-cased whitespace word-level tokenizer over the words of `sentences` (ids: pad 0, unknown 1, bos 2)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from tokenizers.trainers import WordLevelTrainer
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(WordLevel(unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.train_from_iterator(list(sentences), WordLevelTrainer(special_tokens=[PAD, UNK, BOS]))
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, 2)])
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS
    )


def check_fits(tokenizer: PreTrainedTokenizerFast, vocab_size: int) -> None:
    """A clear error when the tokenizer could emit ids the model has no embedding for, or cannot pad."""
    if tokenizer.pad_token_id is None:
        raise Pi0Error("the tokenizer has no pad token: instructions are padded to max_tokens")
    if len(tokenizer) > vocab_size:
        raise Pi0Error(
            f"the tokenizer's vocabulary ({len(tokenizer)} tokens) exceeds the model's vocab_size {vocab_size}"
        )


def tokenize(
    tokenizer: PreTrainedTokenizerFast, instructions: Sequence[str], max_tokens: int, device: torch.device
) -> TokenBatch:
    """Token ids padded to `max_tokens`; an instruction with more tokens is refused, never cut."""
    encoded = tokenizer(list(instructions), padding="max_length", max_length=max_tokens, truncation=False)
    ids = encoded["input_ids"]
    for text, row in zip(instructions, ids, strict=True):
        if len(row) > max_tokens:
            raise Pi0Error(f"instruction {text!r} is {len(row)} tokens, the model takes at most {max_tokens}")
    return TokenBatch(
        torch.tensor(ids, dtype=torch.int64, device=device),
        torch.tensor(encoded["attention_mask"], dtype=torch.bool, device=device),
    )
