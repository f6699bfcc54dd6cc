"""Observation preprocessing, owned by the policy config: state normalisation, image crop, resize, normalisation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias

from user.config import setting
from user.policies.base import PolicyError, TensorObs

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class ObservationConfig:
    """How raw observations become network inputs."""

    state_mean: tuple[float, ...] = setting((), "subtracted from the state; () = 0")
    state_std: tuple[float, ...] = setting((), "the state is divided by it after centring; () = 1")
    cameras: tuple[str, ...] = setting((), "cameras the policy looks at, in order; () = state only")
    crop: tuple[int, int, int, int] | None = setting(None, "(top, left, height, width) cut from each image first")
    image_size: int | None = setting(128, "images are resized to image_size x image_size; null = keep")
    image_mean: tuple[float, float, float] = setting(IMAGENET_MEAN, "per-channel mean of pixels in [0, 1]")
    image_std: tuple[float, float, float] = setting(IMAGENET_STD, "per-channel std of pixels in [0, 1]")

    def __post_init__(self) -> None:
        if len(self.state_mean) != len(self.state_std) and self.state_mean and self.state_std:
            raise ValueError("state_mean and state_std must have the same length")
        if any(s <= 0 for s in self.state_std):
            raise ValueError("state_std entries must be positive")


def to_device(x: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    """`x` on `device` (None: where it is); to a GPU from pinned host memory, without blocking the host."""
    if device is None or x.device == device:
        return x
    if device.type == "cuda":
        return x.pin_memory().to(device, non_blocking=True)
    return x.to(device)


def normalise_state(
    state: npt.NDArray[np.float32], cfg: ObservationConfig, device: torch.device | None = None
) -> torch.Tensor:
    """(B, S) numpy -> (B, S) float32 tensor on `device`, centred and scaled as configured."""
    x = to_device(torch.as_tensor(np.asarray(state, dtype=np.float32)), device)
    if x.dim() != 2:
        raise PolicyError(f"state batch must be (B, S), got shape {tuple(x.shape)}")
    if cfg.state_mean:
        x = x - torch.tensor(cfg.state_mean, dtype=torch.float32, device=x.device)
    if cfg.state_std:
        x = x / torch.tensor(cfg.state_std, dtype=torch.float32, device=x.device)
    return x


def preprocess_images(
    images: npt.NDArray[np.uint8], cfg: ObservationConfig, device: torch.device | None = None
) -> torch.Tensor:
    """(B, H, W, 3) uint8 -> (B, 3, h, w) float32 on `device`: crop, resize (bilinear), scale to [0, 1], normalise.
    The uint8 pixels travel to the device (a quarter of the float bytes) and are converted there."""
    x = to_device(torch.as_tensor(np.asarray(images)), device)
    if x.dim() != 4 or x.shape[-1] != 3:
        raise PolicyError(f"image batch must be (B, H, W, 3), got shape {tuple(x.shape)}")
    if cfg.crop is not None:
        top, left, h, w = cfg.crop
        if top + h > x.shape[1] or left + w > x.shape[2]:
            raise PolicyError(f"crop {cfg.crop} does not fit images of size {tuple(x.shape[1:3])}")
        x = x[:, top : top + h, left : left + w]
    y = x.permute(0, 3, 1, 2).to(torch.float32) / 255.0
    if cfg.image_size is not None and tuple(y.shape[-2:]) != (cfg.image_size, cfg.image_size):
        y = F.interpolate(y, size=(cfg.image_size, cfg.image_size), mode="bilinear", align_corners=False)
    mean = torch.tensor(cfg.image_mean, dtype=torch.float32, device=y.device).view(1, 3, 1, 1)
    std = torch.tensor(cfg.image_std, dtype=torch.float32, device=y.device).view(1, 3, 1, 1)
    return (y - mean) / std


def preprocess(
    state: npt.NDArray[np.float32],
    images: Mapping[str, npt.NDArray[np.uint8]],
    cfg: ObservationConfig,
    device: torch.device | None = None,
) -> TensorObs:
    """Raw batch -> `TensorObs` with the configured cameras (a missing camera is an error), on `device`."""
    missing = [c for c in cfg.cameras if c not in images]
    if missing:
        raise PolicyError(f"observation has no image from camera {missing[0]!r} (has: {', '.join(images) or 'none'})")
    pixels = {c: preprocess_images(images[c], cfg, device) for c in cfg.cameras}
    return TensorObs(normalise_state(state, cfg, device), pixels)
