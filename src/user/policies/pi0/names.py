"""Our tensor names and those of the published π0 PyTorch checkpoints (openpi's converted `model.safetensors`).

openpi's `PI0Pytorch` wraps the PaliGemma model in `PaliGemmaForConditionalGeneration` and the expert in
`GemmaForCausalLM`, so its names carry a `.model` level ours (bare `PaliGemmaModel`, `GemmaModel`) do not. Its
converter saves with `safetensors.torch.save_model`, which keeps one name of tied tensors (the first in sorted
order): the language model's token embedding is stored as `paligemma_with_expert.paligemma.lm_head.weight`
(LeRobot's `_fix_pytorch_state_dict_keys` copies it back to `embed_tokens`). The expert's `lm_head.weight` is in
those files too but π0 never reads it (the expert has no vocabulary); we do not build it (`UNUSED_PUBLISHED`).
transformers 5's `SiglipVisionModel` holds its layers directly where 4.x (openpi pins 4.53.2) had a
`vision_model` level: the vision tower's names gain it back.
"""

from __future__ import annotations

from collections.abc import Iterable

_PG = "paligemma_with_expert.paligemma."
_EX = "paligemma_with_expert.gemma_expert."
_VISION = _PG + "vision_tower."
_PUBLISHED_VISION = _PG + "model.vision_tower.vision_model."
_EMBED = _PG + "language_model.embed_tokens.weight"
_PUBLISHED_EMBED = _PG + "lm_head.weight"

UNUSED_PUBLISHED = frozenset({_EX + "lm_head.weight"})  # in the published files, never read by π0


def published_name(name: str) -> str:
    """The published checkpoint's name of our tensor `name`."""
    if name == _EMBED:
        return _PUBLISHED_EMBED
    if name.startswith(_VISION):
        return _PUBLISHED_VISION + name[len(_VISION) :]
    for prefix in (_PG, _EX):
        if name.startswith(prefix):
            return f"{prefix}model.{name[len(prefix) :]}"
    return name


def our_name(published: str) -> str | None:
    """Our name of a published tensor; None for one π0 does not use (`UNUSED_PUBLISHED`)."""
    if published in UNUSED_PUBLISHED:
        return None
    if published == _PUBLISHED_EMBED:
        return _EMBED
    if published.startswith(_PUBLISHED_VISION):
        return _VISION + published[len(_PUBLISHED_VISION) :]
    for prefix in (_PG, _EX):
        if published.startswith(prefix + "model."):
            return prefix + published[len(prefix) + len("model.") :]
    return published


def published_names(names: Iterable[str]) -> dict[str, str]:
    """Our name -> the published name, for every name given."""
    return {name: published_name(name) for name in names}
