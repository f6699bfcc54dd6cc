"""The `vla` policy kind: built from `size: test` or a local checkpoint directory, with the same weights wherever it is
built (learner and rollout); bad settings and bad checkpoints are one `ConfigError` naming the key or the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from test.conftest import REPO
from user.config import ConfigError, from_mapping
from user.learner.config import LearningConfig
from user.policies import Policy, PolicyInput
from user.policies.pi0 import TEST_SIZE, Pi0Model, Pi0VLA, train_word_tokenizer
from user.policies.pi0.checkpoint import MODEL_FILE
from user.policies.pi0.kind import VLAKindConfig, build_vla_policy
from user.policies.vla import VLAPolicy

INSTRUCTION = "insert the peg into the hole"
PIXELS = {"cameras": ["front"], "image_size": 32, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
TEST: dict[str, Any] = {"size": "test", "instruction": INSTRUCTION, "state_dim": 3, "action_dim": 2}


def load(**vla: Any) -> LearningConfig:
    data = {"policy_kind": "vla", "algorithm": "hg_dagger", "vla": vla}
    return from_mapping(LearningConfig, data, where="run.yaml")


def observation(seed: int = 0) -> PolicyInput:
    rng = np.random.default_rng(seed)
    return PolicyInput(
        rng.normal(size=3).astype(np.float32), {"front": rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)}
    )


def build(config: LearningConfig) -> VLAPolicy:
    """The policy of a `vla` learning config, its π0 model checked."""
    policy = config.build_policy()
    assert isinstance(policy, VLAPolicy) and isinstance(policy.model, Pi0VLA)
    return policy


def pi0(policy: VLAPolicy) -> Pi0Model:
    assert isinstance(policy.model, Pi0VLA)
    return policy.model.model


def _same_weights(a: Policy, b: Policy) -> bool:
    wa, wb = a.get_weights(), b.get_weights()
    return wa.spec == wb.spec and torch.equal(wa.data, wb.data)


def test_size_test_builds_the_same_policy_on_the_learner_and_the_rollout() -> None:
    config = load(**TEST, observation=PIXELS, seed=3)
    learner, rollout = build(config), build(config)
    assert learner.learns_chunks and config.state_dim == 3
    assert _same_weights(learner, rollout)
    assert (learner.model.chunk_size, learner.model.state_dim, learner.action_dim) == (TEST_SIZE.chunk_size, 3, 2)
    other = load(**TEST, observation=PIXELS, seed=4).build_policy()
    assert not torch.equal(other.get_weights().data, learner.get_weights().data)  # the seed draws the weights
    state = torch.random.get_rng_state()
    load(**TEST, observation=PIXELS, chunk_size=6).build_policy()
    assert torch.equal(torch.random.get_rng_state(), state)  # building leaves the global draws alone
    first = learner.act(observation(), deterministic=True)
    assert np.array_equal(first, rollout.act(observation(), deterministic=True))


def test_a_checkpoint_directory_builds_its_weights_on_every_side(tmp_path: Path) -> None:
    torch.manual_seed(5)
    saved = Pi0VLA(Pi0Model(TEST_SIZE), train_word_tokenizer([INSTRUCTION]), state_dim=3, action_dim=2)
    directory = saved.save(tmp_path / "ckpt")
    config = load(checkpoint=str(directory), instruction=INSTRUCTION, state_dim=3, action_dim=2, observation=PIXELS)
    learner, rollout = build(config), build(config)
    assert _same_weights(learner, rollout)
    for name, tensor in saved.model.state_dict().items():
        assert torch.equal(tensor, pi0(learner).state_dict()[name]), name
    assert config.vla.model_chunk_size() == TEST_SIZE.chunk_size
    (directory / MODEL_FILE).unlink()
    with pytest.raises(ConfigError, match=rf"vla.checkpoint: π0 checkpoint {directory / MODEL_FILE}: missing"):
        config.build_policy()


def test_a_checkpoint_that_does_not_fit_the_robot_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"vla.checkpoint: π0 checkpoint {tmp_path / 'none'}: no such directory"):
        load(checkpoint=str(tmp_path / "none"), observation=PIXELS).build_policy()
    torch.manual_seed(0)
    Pi0VLA(Pi0Model(TEST_SIZE), train_word_tokenizer([INSTRUCTION])).save(tmp_path / "ckpt")
    with pytest.raises(ConfigError, match="vla.checkpoint: .*does not fit the model's state_dim 8"):
        load(checkpoint=str(tmp_path / "ckpt"), state_dim=9, observation=PIXELS).build_policy()
    wrist = {**PIXELS, "cameras": ["wrist"]}
    with pytest.raises(ConfigError, match=r"vla.observation.cameras \['wrist'\] lacks \['front'\]"):
        load(checkpoint=str(tmp_path / "ckpt"), observation=wrist).build_policy()


@pytest.mark.parametrize(
    ("vla", "message"),
    [
        ({}, "vla: give checkpoint (a local π0 checkpoint directory) or size: test, not neither"),
        ({"size": "test", "checkpoint": "/ckpt"}, "vla: give checkpoint (a local π0 checkpoint directory) or size"),
        ({"checkpoint": "/ckpt", "seed": 2}, "vla.seed: a setting of size 'test', but size None is selected"),
        ({"checkpoint": "/ckpt", "chunk_size": 10}, "vla.chunk_size: a setting of size 'test'"),
        ({"size": "large"}, "vla.size: 'large' is not one of 'test'"),
        ({"size": "test", "checkpoint": " "}, "vla: give checkpoint"),
        ({"checkpoint": ""}, "vla: checkpoint is empty"),
        ({"size": "test", "observation": {"cameras": []}}, "vla: observation.cameras is empty"),
        ({"size": "test", "observation": {"cameras": ["front"]}}, "vla: observation.image_mean (0.485"),
        ({"size": "test", "execute_horizon": 5}, "vla: execute_horizon 5 exceeds chunk_size 4"),
        ({"size": "test", "state_dim": 0}, "vla.state_dim: 0 is below the minimum 1"),
        ({"size": "test", "instruct": "x"}, "vla: unknown key 'instruct'; did you mean 'instruction'?"),
    ],
)
def test_bad_settings_are_one_config_error_naming_the_key(vla: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(**vla)
    assert str(err.value).startswith(f"run.yaml: {message}"), str(err.value)


def test_a_model_that_cannot_take_the_instruction_is_refused_when_built() -> None:
    words = " ".join(f"w{i}" for i in range(TEST_SIZE.vocab_size))  # more words than the test size's vocabulary
    with pytest.raises(ConfigError, match="vla: the tokenizer's vocabulary"):
        build_vla_policy(VLAKindConfig(size="test", instruction=words))
    long = " ".join(["peg"] * 40)  # one word: the fresh model's max_tokens grows to take it
    assert pi0(build_vla_policy(VLAKindConfig(size="test", instruction=long))).config.max_tokens == 41


def test_the_learner_config_imports_without_transformers() -> None:
    script = (
        "import sys; sys.modules['transformers'] = None; sys.modules['safetensors'] = None\n"
        "import user.learner.config as c, user.algorithms.hg_dagger\n"
        "assert 'vla' in c.POLICIES and c.LearningConfig().vla.size == 'test'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]
