"""π0 behind `VLAModel`: `VLAPolicy` drives it; the core imports without transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from test.conftest import REPO
from user.policies import ObservationConfig, PolicyError, PolicyInput
from user.policies.pi0 import TEST_SIZE, Pi0Error, Pi0Model, Pi0VLA
from user.policies.vla import VLAPolicy, VLAPolicyConfig

SIGLIP_PIXELS = ObservationConfig(cameras=("front",), image_size=24, image_mean=(0.5,) * 3, image_std=(0.5,) * 3)


def test_vla_policy_acts_with_pi0(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    vla = Pi0VLA(model, tokenizer, state_dim=3, action_dim=2)
    policy = VLAPolicy(vla, VLAPolicyConfig("open the drawer", 2, SIGLIP_PIXELS))
    rng = np.random.default_rng(0)
    obs = PolicyInput(
        rng.normal(size=3).astype(np.float32), {"front": rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)}
    )
    actions = np.stack([policy.act(obs) for _ in range(3)])
    assert actions.shape == (3, 2) and np.all(np.abs(actions) <= 1.0)
    assert policy.queries == 2  # two actions of each chunk, then a new query
    chunk = vla.predict({"front": torch.rand(2, 3, 24, 24) * 2 - 1}, torch.zeros(2, 3), "open the drawer")
    assert chunk.shape == (2, TEST_SIZE.chunk_size, 2)


def test_the_chunk_loss_of_the_robots_actions(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    vla = Pi0VLA(model, tokenizer, state_dim=3, action_dim=2)
    images, state = {"front": torch.rand(2, 3, 32, 32) * 2 - 1}, torch.zeros(2, 3)
    mask = torch.tensor([[True, True, True, False], [True] * 4])
    loss, info = vla.chunk_loss(images, state, "push the blue block left", torch.zeros(2, 4, 2), mask)
    assert loss.requires_grad and info["valid_steps"] == 7
    with pytest.raises(Pi0Error, match=r"actions must be \(B, H, 2\)"):
        vla.chunk_loss(images, state, "open the drawer", torch.zeros(2, 4, 3), mask)


def test_bad_robots_and_observations_are_named(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Pi0Error, match="does not fit the model's state_dim 8"):
        Pi0VLA(model, tokenizer, state_dim=9)
    vla = Pi0VLA(model, tokenizer, state_dim=3, action_dim=2)
    with pytest.raises(Pi0Error, match=r"camera\(s\) \['front'\] missing"):
        vla.predict({"wrist": torch.zeros(1, 3, 32, 32)}, torch.zeros(1, 3), "open the drawer")
    with pytest.raises(Pi0Error, match=r"state must be \(B, 3\)"):
        vla.predict({"front": torch.zeros(1, 3, 32, 32)}, torch.zeros(1, 4), "open the drawer")


def test_save_and_load_behind_the_interface(model: Pi0Model, tokenizer, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Pi0VLA(model, tokenizer, state_dim=3, action_dim=2).save(tmp_path / "ckpt")
    again = Pi0VLA.load(tmp_path / "ckpt", state_dim=3, action_dim=2)
    assert (again.state_dim, again.action_dim, again.chunk_size) == (3, 2, TEST_SIZE.chunk_size)


def test_the_core_imports_without_transformers() -> None:
    script = (
        "import sys; sys.modules['transformers'] = None\n"  # an import of it would now fail
        "import user.policies, user.policies.vla, user.algorithms.bc\n"
        "import user.policies.pi0.config as c; assert c.TEST_SIZE.chunk_size\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_the_policy_learns_whole_chunks_of_the_models_size(model: Pi0Model, tokenizer) -> None:  # type: ignore[no-untyped-def]
    policy = VLAPolicy(
        Pi0VLA(model, tokenizer, state_dim=3, action_dim=2), VLAPolicyConfig("open the drawer", 0, SIGLIP_PIXELS)
    )
    assert policy.learns_chunks
    rng = np.random.default_rng(0)
    obs = policy.preprocess(rng.normal(size=(2, 3)).astype(np.float32), {"front": np.zeros((2, 40, 40, 3), np.uint8)})
    mask = torch.tensor([[True, True, False, False], [True] * 4])
    loss, info = policy.chunk_loss(obs, torch.zeros(2, TEST_SIZE.chunk_size, 2), mask)
    assert loss.requires_grad and info["valid_steps"] == 6
    with pytest.raises(PolicyError, match="set the buffer's chunk_horizon to the model's chunk size 4"):
        policy.chunk_loss(obs, torch.zeros(2, 10, 2), torch.ones(2, 10, dtype=torch.bool))
    with pytest.raises(PolicyError, match="chunk mask must be bool"):
        policy.chunk_loss(obs, torch.zeros(2, 4, 2), torch.ones(2, 4))
