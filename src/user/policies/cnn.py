"""`CNNPolicy`: camera images + state in (ResNet-10 encoders, spatial embedding), tanh-Gaussian action out.

The image codec is imported when a batch of encoded images is first decoded: with pixel arrays the policy loads
without the message codec (the GPU benchmark runs where only torch, numpy and pyyaml are installed)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from user.config import setting
from user.policies.base import Encoder, PolicyError, TensorObs
from user.policies.gaussian import GaussianActor, GaussianPolicy, TanhGaussianHead, mlp
from user.policies.preprocess import ObservationConfig, preprocess
from user.policies.resnet import ImageEncoderConfig, ImageStateEncoder


@dataclass(frozen=True)
class CNNPolicyConfig:
    """A policy on camera images and the state vector."""

    state_dim: int = setting(3, "length of the state vector", min=0)
    action_dim: int = setting(1, "length of the action vector (actions are in [-1, 1])", min=1)
    observation: ObservationConfig = setting(
        ObservationConfig(cameras=("wrist",)), "cameras, crop, resize and normalisation of the inputs"
    )
    encoder: ImageEncoderConfig = setting(ImageEncoderConfig(), "the per-camera ResNet encoder")
    hidden: tuple[int, ...] = setting((256, 256), "widths of the hidden layers after the encoder")
    layer_norm: bool = setting(True, "LayerNorm after each hidden linear layer")
    log_std_min: float = setting(-5.0, "lower bound of the Gaussian's log standard deviation")
    log_std_max: float = setting(2.0, "upper bound of the Gaussian's log standard deviation")
    seed: int = setting(0, "seed of the parameter initialisation")

    def __post_init__(self) -> None:
        if not self.observation.cameras:
            raise ValueError("a CNN policy needs at least one camera in observation.cameras")
        if self.observation.image_size is None and self.observation.crop is None:
            raise ValueError("a CNN policy needs a fixed input size: set observation.image_size or observation.crop")

    @property
    def image_size(self) -> tuple[int, int]:
        """(H, W) of the images the encoder sees after crop and resize."""
        obs = self.observation
        if obs.image_size is not None:
            return obs.image_size, obs.image_size
        assert obs.crop is not None
        return obs.crop[2], obs.crop[3]


def decode_batch(images: npt.NDArray[np.generic], camera: str) -> npt.NDArray[np.uint8]:
    """(B,) object array of JPEG/PNG bytes -> (B, H, W, 3) uint8; pixel arrays pass through unchanged."""
    if images.dtype != object:
        return np.asarray(images, dtype=np.uint8)
    # imported here: `user.interfaces` loads the CDR codec (rosbags), which pixel arrays never need
    from user.interfaces.images import ImageCodecError, decode_image

    try:
        frames = [decode_image(bytes(f)) for f in images]
    except ImageCodecError as exc:
        raise PolicyError(f"camera {camera!r}: {exc}") from exc
    if len({f.shape for f in frames}) > 1:
        raise PolicyError(f"camera {camera!r}: images of one batch have different sizes")
    return np.stack(frames).astype(np.uint8, copy=False)


def make_image_encoder(cfg: CNNPolicyConfig) -> ImageStateEncoder:
    return ImageStateEncoder(cfg.encoder, cfg.observation.cameras, cfg.image_size, cfg.state_dim)


class CNNPolicy(GaussianPolicy):
    """ResNet-10 encoders (one per camera) + state -> MLP trunk -> tanh-squashed Gaussian head."""

    def __init__(self, config: CNNPolicyConfig) -> None:
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            encoder = make_image_encoder(config)
            trunk = mlp((encoder.out_features, *config.hidden), layer_norm=config.layer_norm)
            width = config.hidden[-1] if config.hidden else encoder.out_features
            head = TanhGaussianHead(width, config.action_dim, config.log_std_min, config.log_std_max)
        super().__init__(GaussianActor(encoder, trunk, head), config.action_dim)

    @property
    def cameras(self) -> tuple[str, ...]:
        return tuple(self.config.observation.cameras)

    def preprocess(self, state: npt.NDArray[np.float32], images: Mapping[str, npt.NDArray[np.uint8]]) -> TensorObs:
        pixels = {c: decode_batch(images[c], c) for c in self.config.observation.cameras if c in images}
        return preprocess(state, pixels, self.config.observation, self.device)

    def encoder(self) -> Encoder:
        """A fresh encoder for a critic: same architecture, its own weights (pretrained ones loaded again)."""
        return make_image_encoder(self.config)
