"""`ImageStateEncoder.set_speed`: channels-last images give the same features; bf16 autocast gives float32
features within bfloat16's precision (8 significant bits)."""

from __future__ import annotations

import torch

from user.policies.base import TensorObs
from user.policies.resnet import ImageEncoderConfig, ImageStateEncoder


def _encoder() -> ImageStateEncoder:
    torch.manual_seed(0)
    cfg = ImageEncoderConfig(channels=(4, 4, 8, 8), stem_channels=4, groups=2, spatial_features=2, bottleneck=8)
    return ImageStateEncoder(cfg, ("a", "b"), (16, 16), 3)


def _obs() -> TensorObs:
    g = torch.Generator().manual_seed(1)
    return TensorObs(torch.randn(4, 3, generator=g), {c: torch.rand(4, 3, 16, 16, generator=g) for c in ("a", "b")})


def test_channels_last_and_bf16_autocast_keep_the_features() -> None:
    enc, obs = _encoder(), _obs()
    plain = enc(obs)
    enc.set_speed(autocast=None, channels_last=True)
    torch.testing.assert_close(enc(obs), plain, rtol=1e-4, atol=1e-5)  # another summation order in the convolutions
    enc.set_speed(autocast=torch.bfloat16, channels_last=True)
    fast = enc(obs)
    assert fast.dtype == torch.float32 and fast.shape == plain.shape
    torch.testing.assert_close(fast, plain, rtol=0.05, atol=0.05)  # tanh-bounded features, bf16 rounding
    assert torch.equal(fast[:, -3:], obs.state)  # the state is appended as it is
