"""π0 sizes: the published numbers, the transformers configs they make, settings that cannot work."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from user.policies.pi0 import PI0_SIZE, TEST_SIZE, GemmaSize, Pi0Config, Pi0Error
from user.policies.pi0.config import expert_config, paligemma_config


def test_the_published_size() -> None:
    pg, ex = paligemma_config(PI0_SIZE), expert_config(PI0_SIZE)
    v: Any = pg.vision_config
    t: Any = pg.text_config
    assert (v.hidden_size, v.num_hidden_layers, v.num_attention_heads, v.intermediate_size) == (1152, 27, 16, 4304)
    assert (v.patch_size, v.image_size, v.projection_dim) == (14, 224, 2048)
    assert (t.hidden_size, t.num_hidden_layers, t.intermediate_size, t.vocab_size) == (2048, 18, 16384, 257152)
    assert (t.num_attention_heads, t.num_key_value_heads, t.head_dim) == (8, 1, 256)
    assert (ex.hidden_size, ex.num_hidden_layers, ex.intermediate_size, ex.head_dim) == (1024, 18, 4096, 256)
    assert (PI0_SIZE.action_dim, PI0_SIZE.chunk_size, PI0_SIZE.denoise_steps, PI0_SIZE.image_tokens) == (
        32,
        50,
        10,
        256,
    )


def test_sizes_joint_attention_cannot_run_are_refused() -> None:
    with pytest.raises(Pi0Error, match="expert's head_dim 32 differs"):
        dataclasses.replace(TEST_SIZE, expert=GemmaSize(width=64, depth=2, mlp_dim=128, heads=4, head_dim=32))
    with pytest.raises(Pi0Error, match="not a multiple of patch_size"):
        dataclasses.replace(TEST_SIZE, vision=dataclasses.replace(TEST_SIZE.vision, image_size=30))
    with pytest.raises(Pi0Error, match="cameras is empty"):
        Pi0Config(cameras=())
