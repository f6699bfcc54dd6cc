"""Image encoder of the CNN policies: a ResNet-10 trunk (basic blocks, one per stage, like SERL's) per camera,
a learned spatial embedding of its feature map, and a bottleneck; the state is appended to the image features.

GroupNorm (not BatchNorm) keeps every piece of the encoder a parameter, so the whole actor stays in one flat
weight buffer and behaves the same in training and acting. Pretrained trunk weights come only from a LOCAL
file (`torch.save` of `ResNet.state_dict()`); nothing is ever downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.config import setting
from user.policies.base import Encoder, PolicyError, TensorObs


@dataclass(frozen=True)
class ImageEncoderConfig:
    """The per-camera ResNet encoder."""

    channels: tuple[int, ...] = setting((64, 128, 256, 512), "output channels of each ResNet stage")
    blocks: tuple[int, ...] = setting((1, 1, 1, 1), "basic blocks per stage ((1, 1, 1, 1) = ResNet-10)")
    stem_channels: int = setting(64, "channels of the 7x7 stride-2 stem convolution", min=1)
    groups: int = setting(4, "GroupNorm groups (must divide every channel count)", min=1)
    spatial_features: int = setting(8, "learned spatial-embedding maps per trunk channel", min=1)
    bottleneck: int = setting(256, "width of each camera's embedding (Linear + LayerNorm + tanh)", min=1)
    pretrained: str | None = setting(None, "local file with trunk weights (ResNet state_dict); null = random")
    freeze_pretrained: bool = setting(True, "keep loaded trunk weights fixed (no gradient)")

    def __post_init__(self) -> None:
        if len(self.channels) != len(self.blocks) or not self.channels:
            raise ValueError("channels and blocks must be non-empty and of the same length")
        if any(c % self.groups for c in (self.stem_channels, *self.channels)):
            raise ValueError(f"groups ({self.groups}) must divide stem_channels and every stage's channels")


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with GroupNorm and a residual (1x1 projection when shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.project: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.project = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.GroupNorm(groups, c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        out: torch.Tensor = F.relu(y + self.project(x))
        return out


class ResNet(nn.Module):
    """(B, 3, H, W) -> (B, C, h, w): stem (7x7/2 conv, max-pool /2), then stages of basic blocks (stride 1, 2, 2..)."""

    def __init__(self, cfg: ImageEncoderConfig) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, cfg.stem_channels, 7, 2, 3, bias=False),
            nn.GroupNorm(cfg.groups, cfg.stem_channels),
            nn.ReLU(),
            nn.MaxPool2d(3, 2, 1),
        )
        stages: list[nn.Module] = []
        c_in = cfg.stem_channels
        for k, (c_out, n) in enumerate(zip(cfg.channels, cfg.blocks, strict=True)):
            blocks = [
                BasicBlock(c_in if b == 0 else c_out, c_out, 2 if k > 0 and b == 0 else 1, cfg.groups) for b in range(n)
            ]
            stages.append(nn.Sequential(*blocks))
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.out_channels = c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.stages(self.stem(x))
        return out


class SpatialEmbedding(nn.Module):
    """SERL's learned spatial embedding: (B, C, h, w) -> (B, C * K), sum_{hw} x[c, h, w] * kernel[c, k, h, w]."""

    def __init__(self, channels: int, height: int, width: int, features: int) -> None:
        super().__init__()
        self.kernel = nn.Parameter(torch.empty(channels, features, height, width))
        nn.init.kaiming_uniform_(self.kernel.view(channels * features, height * width), a=5**0.5)
        self.out_features = channels * features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.shape[1:] == (self.kernel.shape[0], *self.kernel.shape[2:]), (x.shape, self.kernel.shape)
        return torch.einsum("bchw,ckhw->bck", x, self.kernel).flatten(1)


def load_pretrained(trunk: ResNet, path: str, *, freeze: bool) -> None:
    """Load trunk weights from a local `torch.save(state_dict)` file; freeze them when asked."""
    file = Path(path)
    if not file.is_file():
        raise PolicyError(f"pretrained encoder weights {str(file)!r} do not exist (nothing is downloaded)")
    state = torch.load(file, map_location="cpu", weights_only=True)
    try:
        trunk.load_state_dict(state)
    except RuntimeError as exc:
        raise PolicyError(f"pretrained weights in {str(file)!r} do not fit the configured ResNet: {exc}") from exc
    if freeze:
        trunk.requires_grad_(False)


class CameraEncoder(nn.Module):
    """One camera: ResNet trunk -> spatial embedding -> Linear -> LayerNorm -> tanh, (B, 3, H, W) -> (B, D)."""

    def __init__(self, cfg: ImageEncoderConfig, image_size: tuple[int, int]) -> None:
        super().__init__()
        self.trunk = ResNet(cfg)
        if cfg.pretrained is not None:
            load_pretrained(self.trunk, cfg.pretrained, freeze=cfg.freeze_pretrained)
        with torch.no_grad():
            h, w = self.trunk(torch.zeros(1, 3, *image_size)).shape[-2:]
        self.spatial = SpatialEmbedding(self.trunk.out_channels, int(h), int(w), cfg.spatial_features)
        self.bottleneck = nn.Sequential(
            nn.Linear(self.spatial.out_features, cfg.bottleneck), nn.LayerNorm(cfg.bottleneck), nn.Tanh()
        )
        self.image_size = image_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[-2:]) != self.image_size:
            raise PolicyError(f"images are {tuple(x.shape[-2:])}, the encoder was built for {self.image_size}")
        out: torch.Tensor = self.bottleneck(self.spatial(self.trunk(x)))
        return out


class ImageStateEncoder(Encoder):
    """TensorObs -> concat(camera embeddings in the configured order, state): (B, n_cameras * D + S)."""

    def __init__(
        self, cfg: ImageEncoderConfig, cameras: tuple[str, ...], image_size: tuple[int, int], state_dim: int
    ) -> None:
        super().__init__()
        if not cameras:
            raise PolicyError("an image encoder needs at least one camera")
        self.cameras = cameras
        self.state_dim = state_dim
        self.encoders = nn.ModuleDict({c: CameraEncoder(cfg, image_size) for c in cameras})
        self.out_features = len(cameras) * cfg.bottleneck + state_dim

    def forward(self, obs: TensorObs) -> torch.Tensor:
        if obs.state.shape[-1] != self.state_dim:
            raise PolicyError(f"state has {obs.state.shape[-1]} entries, the policy expects {self.state_dim}")
        missing = [c for c in self.cameras if c not in obs.images]
        if missing:
            raise PolicyError(f"observation has no image from camera {missing[0]!r}")
        feats = [self.encoders[c](obs.images[c]) for c in self.cameras]
        return torch.cat([*feats, obs.state], dim=-1)
