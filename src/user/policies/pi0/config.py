"""Sizes of a π0-shaped model and the transformers configs they make.

`Pi0Config` holds every number the model is built from; `paligemma_config` and `expert_config` turn it into the
stock transformers configs (`PaliGemmaConfig` with its `SiglipVisionConfig` and Gemma `text_config`, and the
action expert's `GemmaConfig`). `PI0_SIZE` is the published π0 (openpi `models/gemma.py` get_config "gemma_2b"
and "gemma_300m", `models_pytorch/gemma_pytorch.py` PaliGemmaWithExpertModel: SigLIP So400m/14 at 224 with
intermediate 4304 and projection 2048, vocabulary 257152; `pi0_config.py` action_dim 32, action_horizon 50);
`TEST_SIZE` is the same shape small enough to train on two CPU cores. transformers is imported only when a
config is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from user.config import setting
from user.policies.pi0.errors import Pi0Error

if TYPE_CHECKING:
    from transformers import GemmaConfig, PaliGemmaConfig


@dataclass(frozen=True)
class VisionSize:
    """The SigLIP vision tower."""

    image_size: int = setting(224, "square input side in pixels", min=1)
    patch_size: int = setting(14, "patch side in pixels; image_size must be a multiple", min=1)
    width: int = setting(1152, "hidden size", min=1)
    depth: int = setting(27, "transformer layers", min=1)
    mlp_dim: int = setting(4304, "MLP hidden size", min=1)
    heads: int = setting(16, "attention heads", min=1)


@dataclass(frozen=True)
class GemmaSize:
    """One Gemma decoder (the PaliGemma language model or the action expert)."""

    width: int = setting(2048, "hidden size", min=1)
    depth: int = setting(18, "decoder layers", min=1)
    mlp_dim: int = setting(16384, "MLP hidden size", min=1)
    heads: int = setting(8, "query heads", min=1)
    kv_heads: int = setting(1, "key/value heads (multi-query attention)", min=1)
    head_dim: int = setting(256, "size of one head", min=1)


@dataclass(frozen=True)
class Pi0Config:
    """A π0-shaped model: PaliGemma prefix, Gemma action expert, flow matching over action chunks."""

    vision: VisionSize = setting(VisionSize(), "the SigLIP vision tower")
    language: GemmaSize = setting(GemmaSize(), "the PaliGemma Gemma decoder the prefix runs through")
    expert: GemmaSize = setting(
        GemmaSize(width=1024, mlp_dim=4096), "the action expert (heads, kv_heads, head_dim as the language model's)"
    )
    vocab_size: int = setting(257152, "token embeddings of the language model (>= the tokenizer's vocabulary)", min=1)
    cameras: tuple[str, ...] = setting(("front",), "cameras the model looks at, in order (one image slot each)")
    state_dim: int = setting(32, "state vector the state projection takes (shorter states are zero-padded)", min=1)
    action_dim: int = setting(32, "action vector the action projections use (robots use the first dims)", min=1)
    chunk_size: int = setting(50, "H: actions per chunk", min=1)
    denoise_steps: int = setting(10, "K: Euler steps from noise to a chunk", min=1)
    max_tokens: int = setting(48, "instruction tokens (padded to it; longer instructions are refused)", min=1)
    min_period: float = setting(4e-3, "shortest period of the sinusoidal time embedding", min=0.0)
    max_period: float = setting(4.0, "longest period of the sinusoidal time embedding", min=0.0)
    time_beta: tuple[float, float] = setting((1.5, 1.0), "Beta(a, b) the training flow time is drawn from")

    def __post_init__(self) -> None:
        if self.vision.image_size % self.vision.patch_size:
            raise Pi0Error(
                f"image_size {self.vision.image_size} is not a multiple of patch_size {self.vision.patch_size}"
            )
        shared = ("heads", "kv_heads", "head_dim", "depth")
        for name in shared:  # joint attention runs both decoders layer by layer over one sequence
            if getattr(self.language, name) != getattr(self.expert, name):
                raise Pi0Error(
                    f"the action expert's {name} {getattr(self.expert, name)} differs from the language model's "
                    f"{getattr(self.language, name)}: joint attention needs them equal"
                )
        if self.language.heads % self.language.kv_heads:
            raise Pi0Error(f"heads {self.language.heads} is not a multiple of kv_heads {self.language.kv_heads}")
        if self.expert.width % 2:
            raise Pi0Error(f"the expert width {self.expert.width} must be even (sine and cosine time embedding)")
        if not self.cameras:
            raise Pi0Error("cameras is empty: π0 looks at one image at least")
        if not 0 < self.min_period < self.max_period:
            raise Pi0Error(f"time embedding periods must satisfy 0 < min_period < max_period, got {self.min_period}")
        if min(self.time_beta) <= 0:
            raise Pi0Error(f"time_beta entries must be positive, got {self.time_beta}")

    @property
    def image_tokens(self) -> int:
        """Tokens one image becomes."""
        return (self.vision.image_size // self.vision.patch_size) ** 2


PI0_SIZE = Pi0Config()  # the published π0 (PaliGemma 3B: So400m/14 + Gemma 2B; Gemma 300M action expert)

TEST_SIZE = Pi0Config(  # about 3M parameters: trains on two CPU cores
    vision=VisionSize(image_size=32, patch_size=8, width=128, depth=2, mlp_dim=512, heads=4),
    language=GemmaSize(width=256, depth=2, mlp_dim=1024, heads=4, kv_heads=1, head_dim=64),
    expert=GemmaSize(width=128, depth=2, mlp_dim=512, heads=4, kv_heads=1, head_dim=64),
    vocab_size=128,
    state_dim=8,
    action_dim=4,
    chunk_size=4,
    denoise_steps=4,
    max_tokens=8,
)


def paligemma_config(config: Pi0Config) -> PaliGemmaConfig:
    """The stock transformers PaliGemma config of the prefix (SigLIP vision tower + Gemma decoder)."""
    from transformers import GemmaConfig, PaliGemmaConfig, SiglipVisionConfig

    v, lm = config.vision, config.language
    vision = SiglipVisionConfig(
        hidden_size=v.width,
        intermediate_size=v.mlp_dim,
        num_hidden_layers=v.depth,
        num_attention_heads=v.heads,
        patch_size=v.patch_size,
        image_size=v.image_size,
        vision_use_head=False,
    )
    text = _gemma(GemmaConfig, lm, config.vocab_size)
    return PaliGemmaConfig(
        vision_config=vision.to_dict(),
        text_config=text.to_dict(),
        projection_dim=lm.width,  # PaliGemmaConfig passes it on to the vision config (the projector's output)
        hidden_size=lm.width,
        vocab_size=config.vocab_size,
        image_token_index=config.vocab_size,  # outside the vocabulary, as openpi's: the prefix never uses it
    )


def expert_config(config: Pi0Config) -> GemmaConfig:
    """The stock transformers Gemma config of the action expert (it reads no tokens: a one-entry vocabulary)."""
    from transformers import GemmaConfig

    return _gemma(GemmaConfig, config.expert, 1, bos=None, eos=None)


def _gemma(
    cls: type[GemmaConfig], size: GemmaSize, vocab: int, bos: int | None = 2, eos: int | None = 1
) -> GemmaConfig:
    return cls(
        vocab_size=vocab,
        hidden_size=size.width,
        intermediate_size=size.mlp_dim,
        num_hidden_layers=size.depth,
        num_attention_heads=size.heads,
        num_key_value_heads=size.kv_heads,
        head_dim=size.head_dim,
        hidden_act="gelu_pytorch_tanh",
        pad_token_id=0,
        bos_token_id=bos,
        eos_token_id=eos,
    )
