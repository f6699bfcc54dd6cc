"""The checkpoint directory: written and read back bit-identically, offline; every bad file is one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from test.conftest import REPO
from test.policies.pi0.conftest import make_batch
from user.policies.pi0 import TEST_SIZE, CheckpointError, Pi0Model, load, save
from user.policies.pi0.checkpoint import CONFIG_FILE, MODEL_FILE, TOKENIZER_FILE


@pytest.fixture
def saved(model: Pi0Model, tokenizer, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    return save(tmp_path / "ckpt", model, tokenizer)


def test_a_saved_directory_loads_back_bit_identically(model: Pi0Model, tokenizer, saved: Path) -> None:  # type: ignore[no-untyped-def]
    assert {p.name for p in saved.iterdir()} >= {MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE}
    loaded, tok = load(saved)
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert ours.keys() == theirs.keys()
    for name, tensor in ours.items():
        assert tensor.dtype == theirs[name].dtype and torch.equal(tensor, theirs[name]), name
    assert loaded.config == model.config
    assert tok("open the drawer")["input_ids"] == tokenizer("open the drawer")["input_ids"]
    obs, noise = make_batch(tokenizer), torch.randn(3, TEST_SIZE.chunk_size, TEST_SIZE.action_dim)
    assert torch.equal(loaded.sample_chunk(obs, noise=noise), model.sample_chunk(obs, noise=noise))


def test_loading_never_reaches_for_a_hub(saved: Path) -> None:
    """HF_HUB_OFFLINE=1 and every socket refused: loading reads the directory alone."""
    script = (
        "import socket, sys\n"
        "def refuse(*a, **k): raise OSError('network used while loading a local checkpoint')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from user.policies.pi0 import Pi0VLA\n"
        f"vla = Pi0VLA.load({str(saved)!r})\n"
        "print('loaded', vla.chunk_size)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(saved.parent / "hf-home"), "NO_PROXY": "*"}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"loaded {TEST_SIZE.chunk_size}" in out.stdout
    assert not (saved.parent / "hf-home").exists()  # nothing cached or fetched


@pytest.mark.parametrize("name", [MODEL_FILE, CONFIG_FILE, TOKENIZER_FILE])
def test_a_missing_file_is_named(saved: Path, name: str) -> None:
    (saved / name).unlink()
    with pytest.raises(CheckpointError, match=rf"{name}: missing") as exc:
        load(saved)
    assert exc.value.path == saved / name


def _rewrite(saved: Path, change) -> None:  # type: ignore[no-untyped-def]
    tensors = load_file(str(saved / MODEL_FILE))
    change(tensors)
    save_file(tensors, str(saved / MODEL_FILE))


def test_a_tensor_of_the_wrong_shape_is_named(saved: Path) -> None:
    _rewrite(saved, lambda t: t.__setitem__("state_proj.weight", torch.zeros(3, 3)))
    with pytest.raises(CheckpointError, match=r"model.safetensors: .*wrong shape: state_proj.weight is \(3, 3\)"):
        load(saved)


def test_a_missing_and_an_unknown_tensor_are_named(saved: Path) -> None:
    _rewrite(saved, lambda t: t.pop("action_out_proj.bias"))
    with pytest.raises(CheckpointError, match=r"model.safetensors: .*1 tensor\(s\) missing \(action_out_proj.bias\)"):
        load(saved)
    _rewrite(saved, lambda t: t.update({"action_out_proj.bias": torch.zeros(4), "extra.weight": torch.zeros(1)}))
    with pytest.raises(CheckpointError, match=r"unknown tensor\(s\) \(extra.weight\)"):
        load(saved)


def test_a_file_that_is_not_safetensors_is_named(saved: Path) -> None:
    (saved / MODEL_FILE).write_bytes(b"not a tensor file")
    with pytest.raises(CheckpointError, match="model.safetensors: not a readable safetensors file"):
        load(saved)


def test_a_config_that_does_not_match_is_named(saved: Path) -> None:
    data = json.loads((saved / CONFIG_FILE).read_text())
    data["gemma_expert"]["hidden_size"] = 96
    (saved / CONFIG_FILE).write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=r"config.json: .*gemma_expert.hidden_size is 96, the pi0 sizes make 128"):
        load(saved)
    data["gemma_expert"]["hidden_size"] = 128
    data["pi0"]["chunk_sizes"] = 3
    (saved / CONFIG_FILE).write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=r"config.json: .*chunk_sizes"):
        load(saved)
    (saved / CONFIG_FILE).write_text("{")
    with pytest.raises(CheckpointError, match="config.json: not readable JSON"):
        load(saved)


def test_a_config_of_other_sizes_than_the_tensors_is_named(saved: Path) -> None:
    """Consistent configs of another model: the tensors no longer fit, and the file says so."""
    data = json.loads((saved / CONFIG_FILE).read_text())
    data["pi0"]["action_dim"] = 6
    (saved / CONFIG_FILE).write_text(json.dumps(data))
    with pytest.raises(
        CheckpointError, match=r"model.safetensors: .*action_in_proj.weight is \(128, 4\), the model has \(128, 6\)"
    ):
        load(saved)
