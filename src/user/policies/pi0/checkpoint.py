"""A π0 checkpoint directory: `model.safetensors`, `config.json` (our sizes and the transformers sub-configs) and
the tokenizer's files. Loading reads local files only, never a hub; anything missing or not matching is one
`CheckpointError` naming the file and what is wrong with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from user.config import ConfigError, from_mapping, to_data
from user.policies.pi0.config import Pi0Config, expert_config, paligemma_config
from user.policies.pi0.errors import CheckpointError, Pi0Error
from user.policies.pi0.model import Pi0Model
from user.policies.pi0.tokenizer import check_fits

if TYPE_CHECKING:
    from transformers import GemmaConfig, PaliGemmaConfig, PreTrainedConfig, PreTrainedTokenizerFast

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
FORMAT = "user.pi0"
VERSION = 1

# The transformers settings that decide the tensors' shapes: checked against our sizes on load.
_VISION_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "patch_size",
    "image_size",
)
_TEXT_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
)


def save(directory: str | Path, model: Pi0Model, tokenizer: PreTrainedTokenizerFast) -> Path:
    """Write the model's tensors, its configs and the tokenizer into `directory` (created if missing)."""
    from safetensors.torch import save_file

    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(path / MODEL_FILE), metadata={"format": "pt"})
    backbone = model.paligemma_with_expert
    config = {
        "format": FORMAT,
        "version": VERSION,
        "pi0": to_data(model.config),
        "paligemma": backbone.paligemma.config.to_dict(),
        "gemma_expert": backbone.gemma_expert.config.to_dict(),
    }
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(str(path))
    return path


def load(directory: str | Path, device: str | torch.device = "cpu") -> tuple[Pi0Model, PreTrainedTokenizerFast]:
    """The model (its tensors exactly as stored) and tokenizer of a checkpoint directory, from local files only."""
    path = Path(directory)
    if not path.is_dir():
        raise CheckpointError(path, "no such directory")
    config, paligemma, expert = read_config(path / CONFIG_FILE)
    with torch.device(device):
        model = Pi0Model(config, paligemma, expert)
    model.load_state_dict(read_tensors(path / MODEL_FILE, model, torch.device(device)), strict=True, assign=True)
    return model, read_tokenizer(path, config.vocab_size)


def stored_config(directory: str | Path) -> Pi0Config:
    """Our config alone of a checkpoint directory's `config.json` (its sizes: chunk_size ...), without transformers
    and without reading the tensors."""
    path = Path(directory)
    if not path.is_dir():
        raise CheckpointError(path, "no such directory")
    file = path / CONFIG_FILE
    data = _json(file)
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise CheckpointError(file, f"not a {FORMAT} version {VERSION} config (format {data.get('format')!r})")
    if not isinstance(data.get("pi0"), dict):
        raise CheckpointError(file, "no 'pi0' section")
    try:
        return from_mapping(Pi0Config, data["pi0"], where="pi0")
    except (ConfigError, Pi0Error) as exc:
        raise CheckpointError(file, str(exc)) from None


def read_config(file: Path) -> tuple[Pi0Config, PaliGemmaConfig, GemmaConfig]:
    """Our config and the PaliGemma and expert configs of `config.json`, checked against each other."""
    from transformers import GemmaConfig, PaliGemmaConfig

    data = _json(file)
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise CheckpointError(file, f"not a {FORMAT} version {VERSION} config (format {data.get('format')!r})")
    for key in ("pi0", "paligemma", "gemma_expert"):
        if not isinstance(data.get(key), dict):
            raise CheckpointError(file, f"no {key!r} section")
    try:
        config = from_mapping(Pi0Config, data["pi0"], where="pi0")
        paligemma = PaliGemmaConfig.from_dict(data["paligemma"])
        expert = GemmaConfig.from_dict(data["gemma_expert"])
    except (ConfigError, Pi0Error, TypeError, ValueError) as exc:
        raise CheckpointError(file, str(exc)) from None
    _check_same(file, "paligemma", _shape_settings(paligemma), _shape_settings(paligemma_config(config)))
    _check_same(file, "gemma_expert", _shape_settings(expert), _shape_settings(expert_config(config)))
    return config, paligemma, expert


def read_tensors(file: Path, model: Pi0Model, device: torch.device) -> dict[str, torch.Tensor]:
    """The tensors of `file`, after checking they are exactly the model's names and shapes."""
    from safetensors import SafetensorError, safe_open

    if not file.is_file():
        raise CheckpointError(file, "missing: the model's tensors are not there")
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    try:
        with safe_open(str(file), framework="pt", device=str(device)) as f:
            stored = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
            _check_tensors(file, expected, stored)
            return {name: f.get_tensor(name) for name in stored}
    except SafetensorError as exc:
        raise CheckpointError(file, f"not a readable safetensors file ({exc})") from None


def read_tokenizer(directory: Path, vocab_size: int) -> PreTrainedTokenizerFast:
    """The checkpoint's tokenizer, from its files alone (local_files_only: no hub lookup)."""
    from transformers import PreTrainedTokenizerFast

    file = directory / TOKENIZER_FILE
    if not file.is_file():
        raise CheckpointError(file, "missing: the tokenizer's files are not there")
    try:
        tokenizer = cast(
            "PreTrainedTokenizerFast", PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)
        )
        check_fits(tokenizer, vocab_size)
    except (OSError, ValueError) as exc:
        raise CheckpointError(file, str(exc)) from None
    return tokenizer


def _json(file: Path) -> dict[str, Any]:
    if not file.is_file():
        raise CheckpointError(file, "missing: the model's configuration is not there")
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(file, f"not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CheckpointError(file, "not a JSON object")
    return data


def _shape_settings(config: PreTrainedConfig) -> dict[str, Any]:
    """The settings of a PaliGemma or Gemma config that decide tensor shapes, by dotted name."""
    text = getattr(config, "text_config", None)
    if text is None:
        return {key: getattr(config, key, None) for key in (*_TEXT_KEYS, "hidden_act")}
    out = {f"text_config.{key}": getattr(text, key, None) for key in (*_TEXT_KEYS, "vocab_size", "hidden_act")}
    vision = config.vision_config
    out.update({f"vision_config.{key}": getattr(vision, key, None) for key in (*_VISION_KEYS, "projection_dim")})
    return out


def _check_same(file: Path, section: str, stored: dict[str, Any], expected: dict[str, Any]) -> None:
    wrong = [f"{section}.{k} is {stored[k]!r}, the pi0 sizes make {v!r}" for k, v in expected.items() if stored[k] != v]
    if wrong:
        raise CheckpointError(file, "the transformers config does not match the pi0 sizes: " + "; ".join(wrong))


def _check_tensors(file: Path, expected: dict[str, tuple[int, ...]], stored: dict[str, tuple[int, ...]]) -> None:
    missing = sorted(set(expected) - set(stored))
    extra = sorted(set(stored) - set(expected))
    wrong = [
        f"{n} is {stored[n]}, the model has {expected[n]}"
        for n in sorted(expected)
        if stored.get(n, expected[n]) != expected[n]
    ]
    problems = []
    if missing:
        problems.append(
            f"{len(missing)} tensor(s) missing ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
        )
    if extra:
        problems.append(f"{len(extra)} unknown tensor(s) ({', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''})")
    if wrong:
        problems.append(f"wrong shape: {'; '.join(wrong[:3])}{'; ...' if len(wrong) > 3 else ''}")
    if problems:
        raise CheckpointError(file, "does not match the model: " + "; ".join(problems))
