"""CNN policy on tiny images: shapes, action range, flat weights, local pretrained weights, SAC learning, DrQ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from test.algorithms.factories import fixed_batch
from user.algorithms.base import to_torch
from user.algorithms.sac import SAC, SACConfig
from user.config import ConfigError, from_mapping
from user.interfaces.images import encode_jpeg
from user.policies.base import PolicyError, PolicyInput
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import CameraEncoder, ImageEncoderConfig, ImageStateEncoder, ResNet

CAMERAS = ("wrist", "front")
TINY = ImageEncoderConfig(channels=(8, 8, 16, 16), stem_channels=8, groups=2, spatial_features=2, bottleneck=8)


def _config(seed: int = 0, encoder: ImageEncoderConfig = TINY, **obs: Any) -> CNNPolicyConfig:
    observation = ObservationConfig(cameras=CAMERAS, **{"image_size": 32, **obs})
    return CNNPolicyConfig(state_dim=3, action_dim=2, observation=observation, encoder=encoder, hidden=(16,), seed=seed)


def _obs(seed: int = 0, size: int = 32) -> PolicyInput:
    rng = np.random.default_rng(seed)
    images = {c: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for c in CAMERAS}
    return PolicyInput(rng.normal(size=3).astype(np.float32), images)


def test_encoder_shapes_on_two_tiny_cameras() -> None:
    policy = CNNPolicy(_config())
    obs = policy.preprocess(fixed_batch(5).state, {c: np.zeros((5, 48, 40, 3), np.uint8) for c in CAMERAS})
    assert all(v.shape == (5, 3, 32, 32) for v in obs.images.values())  # resized by the config
    encoder = policy.encoder()
    assert encoder(obs).shape == (5, 2 * TINY.bottleneck + 3) == (5, encoder.out_features)
    mean, log_std = policy.dist_params(obs)
    assert mean.shape == log_std.shape == (5, 2)
    action, log_prob = policy.sample(obs)
    assert action.shape == (5, 2) and log_prob.shape == (5,)


def test_act_is_bounded_and_deterministic_when_asked() -> None:
    policy = CNNPolicy(_config())
    a = policy.act(_obs())
    assert a.shape == (2,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1)
    assert np.array_equal(policy.act(_obs(), deterministic=True), policy.act(_obs(), deterministic=True))


def test_crop_sets_the_input_size_and_missing_camera_fails() -> None:
    policy = CNNPolicy(_config(image_size=None, crop=(2, 4, 24, 20)))
    obs = policy.preprocess(np.zeros((1, 3), np.float32), {c: np.zeros((1, 32, 32, 3), np.uint8) for c in CAMERAS})
    assert obs.images["wrist"].shape == (1, 3, 24, 20)
    assert policy.act(_obs()).shape == (2,)
    with pytest.raises(PolicyError, match="front"):
        policy.act(PolicyInput(np.zeros(3, np.float32), {"wrist": np.zeros((32, 32, 3), np.uint8)}))


def test_jpeg_images_are_decoded() -> None:
    policy = CNNPolicy(_config())
    pixels = {c: np.full((2, 32, 32, 3), 128, np.uint8) for c in CAMERAS}
    jpegs = {}
    for c, v in pixels.items():
        arr = np.empty(2, dtype=object)
        arr[:] = [encode_jpeg(frame) for frame in v]
        jpegs[c] = arr
    a = policy.preprocess(np.zeros((2, 3), np.float32), pixels)
    b = policy.preprocess(np.zeros((2, 3), np.float32), jpegs)
    assert torch.allclose(a.images["wrist"], b.images["wrist"], atol=0.05)


def test_config_needs_cameras_and_a_size() -> None:
    with pytest.raises(ConfigError, match="camera"):
        from_mapping(CNNPolicyConfig, {"observation": {"cameras": []}}, where="policy")
    with pytest.raises(ConfigError, match="image_size"):
        from_mapping(CNNPolicyConfig, {"observation": {"cameras": ["wrist"], "image_size": None}}, where="policy")
    with pytest.raises(ConfigError, match="unknown key"):
        from_mapping(CNNPolicyConfig, {"encoder": {"chanels": [8]}}, where="policy")


def test_flat_weights_round_trip() -> None:
    src, dst = CNNPolicy(_config(seed=1)), CNNPolicy(_config(seed=2))
    assert not torch.equal(src.get_weights().data, dst.get_weights().data)
    src.version = 4
    dst.load_weights(src.get_weights())
    assert dst.version == 4
    assert np.array_equal(src.act(_obs(), deterministic=True), dst.act(_obs(), deterministic=True))
    assert src.get_weights().spec.numel == sum(p.numel() for p in src.actor.parameters())


def _camera(net: nn.Module, camera: str) -> CameraEncoder:
    """The encoder of one camera inside an actor or a critic (whose `encoder` is an ImageStateEncoder)."""
    encoder = net.encoder
    assert isinstance(encoder, ImageStateEncoder)
    module = encoder.encoders[camera]
    assert isinstance(module, CameraEncoder)
    return module


def _save_trunk(path: Path) -> dict[str, torch.Tensor]:
    torch.manual_seed(11)
    state = {k: v + 0.01 for k, v in ResNet(TINY).state_dict().items()}  # distinct from any seeded init
    torch.save(state, path)
    return state


def test_frozen_pretrained_trunk_is_loaded_and_stays_fixed(tmp_path: Path) -> None:
    saved = _save_trunk(tmp_path / "resnet10.pt")
    enc = ImageEncoderConfig(**{**TINY.__dict__, "pretrained": str(tmp_path / "resnet10.pt")})
    policy = CNNPolicy(_config(encoder=enc))
    trunk = _camera(policy.actor, "wrist").trunk
    assert all(torch.equal(v, saved[k]) for k, v in trunk.state_dict().items())
    assert not any(p.requires_grad for p in trunk.parameters())
    sac = SAC(policy, SACConfig(critic_hidden=(16,)), seed=0)
    critic_trunk = _camera(sac.critic, "front").trunk
    assert all(torch.equal(v, saved[k]) for k, v in critic_trunk.state_dict().items())
    before = policy.get_weights().data.clone()
    sac.update(fixed_batch(8, images=dict.fromkeys(CAMERAS, (32, 32))))
    assert all(torch.equal(v, saved[k]) for k, v in trunk.state_dict().items())  # frozen: unchanged
    assert all(torch.equal(v, saved[k]) for k, v in critic_trunk.state_dict().items())
    assert not torch.equal(policy.get_weights().data, before)  # the rest of the actor trained


def test_pretrained_weights_must_exist_and_fit(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="nothing is downloaded"):
        CNNPolicy(_config(encoder=ImageEncoderConfig(**{**TINY.__dict__, "pretrained": str(tmp_path / "no.pt")})))
    torch.save({"stem.0.weight": torch.zeros(1)}, tmp_path / "bad.pt")
    with pytest.raises(PolicyError, match="do not fit"):
        CNNPolicy(_config(encoder=ImageEncoderConfig(**{**TINY.__dict__, "pretrained": str(tmp_path / "bad.pt")})))


def test_sac_losses_decrease_on_a_fixed_image_batch() -> None:
    torch.manual_seed(0)
    sac = SAC(CNNPolicy(_config()), SACConfig(critic_hidden=(16,), tau=0.0, critic_lr=1e-3), seed=0)
    batch = to_torch(fixed_batch(16, images=dict.fromkeys(CAMERAS, (32, 32))), sac.policy)
    first = sac.critic_step(batch)[0].item()
    for _ in range(100):
        last = sac.critic_step(batch)[0].item()
    assert last < 0.5 * first
    sac.config = SACConfig(critic_hidden=(16,), critic_lr=0.0, temperature_lr=0.0)
    first_actor = sac.actor_step(batch)[0]["actor"]
    for _ in range(30):
        last_actor = sac.actor_step(batch)[0]["actor"]
    assert last_actor < first_actor


def test_sac_drq_shifts_what_the_cnn_sees() -> None:
    batch = fixed_batch(8, images=dict.fromkeys(CAMERAS, (32, 32)))
    seen: dict[str, list[torch.Tensor]] = {"none": [], "drq": []}
    for augmentation, record in seen.items():
        sac = SAC(CNNPolicy(_config()), SACConfig(critic_hidden=(16,), augmentation=augmentation), seed=0)
        camera = _camera(sac.critic, "wrist")
        camera.register_forward_pre_hook(lambda _, args, record=record: record.append(args[0].clone()))
        sac.update(batch)
    raw = to_torch(batch, CNNPolicy(_config())).obs.images["wrist"]
    assert len(seen["none"]) == len(seen["drq"]) == 2  # critic loss and actor's Q features (targets unhooked)
    assert all(torch.equal(x, raw) for x in seen["none"])
    assert all(x.shape == raw.shape and not torch.equal(x, raw) for x in seen["drq"])
