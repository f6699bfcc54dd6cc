"""Instructions to padded token ids with a tokenizer trained here (nothing downloaded)."""

from __future__ import annotations

import pytest
import torch

from user.policies.pi0 import Pi0Error, tokenize
from user.policies.pi0.tokenizer import check_fits


def test_instructions_are_padded_and_masked(tokenizer) -> None:  # type: ignore[no-untyped-def]
    batch = tokenize(tokenizer, ["open the drawer", "Pick up the red cube"], 8, torch.device("cpu"))
    assert batch.ids.shape == (2, 8) and batch.ids.dtype == torch.int64
    assert batch.mask.sum(dim=1).tolist() == [4, 6]  # a BOS token, then the words
    assert batch.ids[0, 4:].tolist() == [tokenizer.pad_token_id] * 4
    unknown = tokenize(tokenizer, ["fly away"], 8, torch.device("cpu"))
    assert unknown.ids[0, 1:3].tolist() == [tokenizer.unk_token_id] * 2


def test_too_long_instructions_and_too_large_vocabularies_are_refused(tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Pi0Error, match="is 6 tokens, the model takes at most 4"):
        tokenize(tokenizer, ["pick up the red cube"], 4, torch.device("cpu"))
    with pytest.raises(Pi0Error, match="exceeds the model's vocab_size 5"):
        check_fits(tokenizer, 5)
