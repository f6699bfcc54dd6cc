"""The PaliGemma prefix and the Gemma action expert, run layer by layer over one sequence (joint attention).

`PaliGemmaWithExpert` holds a stock transformers `PaliGemmaModel` (SigLIP vision tower, projector, Gemma
decoder) and a stock `GemmaModel` as the action expert (no token embedding: it reads only the suffix). Both
decoders have the same depth, heads and head size; in every layer each computes queries, keys and values from
its own tokens with its own weights, one attention runs over the concatenation (under π0's mask, `masks.py`),
and each takes its own slice of the result through its own output projection and MLP (openpi
`models_pytorch/gemma_pytorch.py` PaliGemmaWithExpertModel.forward; LeRobot `policies/pi0/modeling_pi0.py`
compute_layer_complete). Sampling runs the prefix once (`cache_prefix`) and then only the suffix per Euler step
against the cached keys and values (`forward_suffix`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

if TYPE_CHECKING:
    from transformers import GemmaConfig, PaliGemmaConfig


class LayerCache(NamedTuple):
    """Keys and values (B, kv_heads, T, head_dim) of the prefix tokens in one layer."""

    keys: torch.Tensor
    values: torch.Tensor


class _Stream(NamedTuple):
    """One decoder's part of a layer: its layer, its tokens, its rotary cos/sin."""

    layer: Any  # a transformers GemmaDecoderLayer
    hidden: torch.Tensor
    rope: tuple[torch.Tensor, torch.Tensor]


class PaliGemmaWithExpert(nn.Module):
    """The two decoders of π0 and the vision tower, with a joint-attention forward."""

    def __init__(self, paligemma: PaliGemmaConfig, expert: GemmaConfig) -> None:
        super().__init__()
        from transformers import GemmaModel, PaliGemmaModel

        expert_model = GemmaModel(expert)
        expert_model.embed_tokens = None  # type: ignore[assignment]  # the expert reads no tokens (as openpi's)
        self.paligemma: Any = PaliGemmaModel(paligemma)
        self.gemma_expert: Any = expert_model

    @property
    def language_model(self) -> Any:
        return self.paligemma.language_model

    def embed_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, S, S) in [-1, 1] -> (B, N, width) image tokens (SigLIP then the linear projector)."""
        tokens: torch.Tensor = self.paligemma.get_image_features(pixels).pooler_output
        return tokens

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids -> (B, L, width), scaled by sqrt(width) as Gemma does."""
        embedded: torch.Tensor = self.language_model.embed_tokens(ids)
        return embedded

    def forward(
        self, prefix: torch.Tensor, suffix: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """Joint pass for training: (B, P, W) prefix and (B, S, w) suffix under the (B, 1, P+S, P+S) additive mask
        and (B, P+S) positions -> (B, S, w) suffix outputs after the expert's final norm."""
        split = prefix.shape[1]
        rope_p = self._rope(prefix, positions[:, :split])
        rope_s = self._rope(suffix, positions[:, split:])
        hidden = [prefix, suffix]
        for lm_layer, ex_layer in zip(self.language_model.layers, self.gemma_expert.layers, strict=True):
            streams = [_Stream(lm_layer, hidden[0], rope_p), _Stream(ex_layer, hidden[1], rope_s)]
            hidden, _ = _joint_layer(streams, mask, None)
        return self._final_norm(hidden[1])

    def cache_prefix(self, prefix: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> list[LayerCache]:
        """Run the prefix alone (B, P, W) and keep each layer's keys and values for `forward_suffix`."""
        rope = self._rope(prefix, positions)
        hidden, cache = prefix, []
        for layer in self.language_model.layers:
            (hidden,), kv = _joint_layer([_Stream(layer, hidden, rope)], mask, None)
            cache.append(kv)
        return cache

    def forward_suffix(
        self, suffix: torch.Tensor, cache: list[LayerCache], mask: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The expert's pass over (B, S, w) suffix tokens attending to the cached prefix: `mask` (B, 1, S, P+S)."""
        rope = self._rope(suffix, positions)
        hidden = suffix
        for layer, kv in zip(self.gemma_expert.layers, cache, strict=True):
            (hidden,), _ = _joint_layer([_Stream(layer, hidden, rope)], mask, kv)
        return self._final_norm(hidden)

    def _final_norm(self, hidden: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.gemma_expert.norm(hidden)
        return out

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.language_model.rotary_emb(x, positions)
        return cos, sin


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _qkv(stream: _Stream) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Normed tokens -> rotary-embedded queries, keys, and values, each (B, heads, T, head_dim)."""
    attn = stream.layer.self_attn
    x = stream.layer.input_layernorm(stream.hidden)
    shape = (*x.shape[:-1], -1, attn.head_dim)
    q, k, v = (proj(x).view(shape).transpose(1, 2) for proj in (attn.q_proj, attn.k_proj, attn.v_proj))
    cos, sin = (t.unsqueeze(1) for t in stream.rope)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin, v


def _joint_layer(
    streams: list[_Stream], mask: torch.Tensor, past: LayerCache | None
) -> tuple[list[torch.Tensor], LayerCache]:
    """One decoder layer of every stream with one attention over all their tokens (after `past`'s)."""
    parts = [_qkv(s) for s in streams]
    q = torch.cat([p[0] for p in parts], dim=2)
    k = torch.cat([p[1] for p in parts], dim=2)
    v = torch.cat([p[2] for p in parts], dim=2)
    current = LayerCache(k, v)
    if past is not None:
        k, v = torch.cat([past.keys, k], dim=2), torch.cat([past.values, v], dim=2)
    first = streams[0].layer.self_attn
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype), scale=first.scaling, enable_gqa=True)
    out = out.transpose(1, 2).flatten(2)  # (B, T, heads * head_dim)
    results, start = [], 0
    for s in streams:
        end = start + s.hidden.shape[1]
        h = s.hidden + s.layer.self_attn.o_proj(out[:, start:end].to(s.hidden.dtype))
        results.append(h + s.layer.mlp(s.layer.post_attention_layernorm(h)))
        start = end
    return results, current
