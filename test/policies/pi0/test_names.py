"""The full-size model's tensors against the published π0 checkpoint's listing (names and shapes, no weights)."""

from __future__ import annotations

from pathlib import Path

import torch

from user.policies.pi0 import PI0_SIZE, Pi0Model, published_names
from user.policies.pi0.names import UNUSED_PUBLISHED, our_name, published_name

LISTING = Path(__file__).resolve().parents[2] / "data" / "pi0_state_dict.txt"


def published_listing() -> dict[str, tuple[int, ...]]:
    rows = {}
    for line in LISTING.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, *shape = line.split()
            rows[name] = tuple(int(s) for s in shape)
    return rows


def test_the_full_size_state_dict_matches_the_published_listing() -> None:
    with torch.device("meta"):  # no memory: shapes only
        model = Pi0Model(PI0_SIZE)
    ours = {published_name(n): tuple(t.shape) for n, t in model.state_dict().items()}
    listed = published_listing()
    assert set(listed) - set(ours) == set(UNUSED_PUBLISHED)
    assert set(ours) - set(listed) == set()
    wrong = {n: (s, listed[n]) for n, s in ours.items() if listed[n] != s}
    assert not wrong
    assert 3.0e9 < sum(t.numel() for t in model.state_dict().values()) < 3.5e9  # PaliGemma 3B + Gemma 300M


def test_the_mapping_goes_both_ways() -> None:
    with torch.device("meta"):
        names = list(Pi0Model(PI0_SIZE).state_dict())
    mapped = published_names(names)
    assert len(set(mapped.values())) == len(names)
    assert all(our_name(p) == n for n, p in mapped.items())
    assert mapped["paligemma_with_expert.paligemma.language_model.embed_tokens.weight"] == (
        "paligemma_with_expert.paligemma.lm_head.weight"
    )
    assert mapped["paligemma_with_expert.paligemma.vision_tower.post_layernorm.weight"] == (
        "paligemma_with_expert.paligemma.model.vision_tower.vision_model.post_layernorm.weight"
    )
    assert mapped["paligemma_with_expert.gemma_expert.layers.0.mlp.up_proj.weight"] == (
        "paligemma_with_expert.gemma_expert.model.layers.0.mlp.up_proj.weight"
    )
    assert mapped["action_time_mlp_in.weight"] == "action_time_mlp_in.weight"
    assert all(our_name(p) is None for p in UNUSED_PUBLISHED)
