"""The learner's device: names resolved against this machine, policies re-homed, training on the device."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from test.algorithms.factories import fixed_batch, through_file
from user.algorithms.rlpd import RLPD, RLPDConfig
from user.config.strict import ConfigError
from user.learner.device import resolve_device, training_threads
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.mlp import MLPPolicy, MLPPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

TINY = ImageEncoderConfig(channels=(8, 8, 16, 16), stem_channels=8, groups=2, spatial_features=2, bottleneck=8)

GPU = torch.cuda.is_available()


def test_cpu_and_auto_resolve() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if GPU else "cpu")


@pytest.mark.parametrize("name", ["tpu", "not a device", "mps"])
def test_unknown_or_unsupported_device_names_fail(name: str) -> None:
    with pytest.raises(ConfigError, match="device"):
        resolve_device(name)


@pytest.mark.skipif(GPU, reason="this machine has a GPU")
def test_missing_gpu_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        resolve_device("cuda:0")


def test_moving_a_policy_rehomes_its_flat_parameters() -> None:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2))
    before = policy.get_weights().data
    assert policy.to("cpu") is policy and policy.device == torch.device("cpu")
    policy.to("meta")  # a real move (no memory needed): parameters must be views of a new flat buffer
    assert policy.device.type == "meta"
    assert all(p.device.type == "meta" for p in policy.actor.parameters())
    assert policy._flat.intact()
    assert before.device.type == "cpu"


def _train_and_round_trip(device: str, tmp_path: Path, images: bool) -> None:
    if images:
        observation = ObservationConfig(cameras=("front",), image_size=16)
        config_cnn = CNNPolicyConfig(state_dim=3, action_dim=2, observation=observation, encoder=TINY, hidden=(16,))
        policy: MLPPolicy | CNNPolicy = CNNPolicy(config_cnn).to(device)
        batch = fixed_batch(16, images={"front": (16, 16)})
        config = RLPDConfig(batch_size=16, num_critics=4, augmentation="drq", utd_ratio=2)
    else:
        policy = MLPPolicy(MLPPolicyConfig(state_dim=3, action_dim=2)).to(device)
        batch = fixed_batch(16)
        config = RLPDConfig(batch_size=16, num_critics=4, utd_ratio=2)
    algo = RLPD(policy, config)
    assert all(p.device.type == torch.device(device).type for p in algo.critic.parameters())
    stats = algo.update(batch)
    assert stats.updates == 2 and all(torch.isfinite(torch.tensor(v)) for v in stats.losses.values())
    assert policy.get_weights().data.device.type == "cpu"  # what is published is always a host copy
    other_policy = type(policy)(policy.config).to(device)  # type: ignore[arg-type]
    other = RLPD(other_policy, config)
    through_file(algo, other, tmp_path / "algo.pt")
    assert torch.equal(other_policy.get_weights().data, policy.get_weights().data)


@pytest.mark.parametrize("images", [False, True])
def test_rlpd_trains_and_round_trips_on_cpu(tmp_path: Path, images: bool) -> None:
    _train_and_round_trip("cpu", tmp_path, images)


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("images", [False, True])
def test_rlpd_trains_and_round_trips_on_gpu(tmp_path: Path, images: bool) -> None:
    _train_and_round_trip("cuda", tmp_path, images)


def test_the_learner_leaves_one_core_to_the_nodes_beside_it_unless_told() -> None:
    """Issue 14: 0 threads = every usable core but one, never fewer than one; a set count is kept."""
    assert training_threads(0, 2) == 1
    assert training_threads(0, 16) == 15
    assert training_threads(0, 1) == 1
    assert training_threads(3, 2) == 3
    assert training_threads(1, 16) == 1
