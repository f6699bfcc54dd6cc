"""The ResNet family (basic blocks, He et al. 2016) and the image encoder of the CNN policies built on it.

One residual block, one stem and one stage builder make every ResNet here; a layout (`ResNetLayout`) says how
many basic blocks each stage has (`RESNET10` = one, as in SERL's encoder; `RESNET18` = two), how wide each
stage is and which normalisation follows each convolution. The CNN policies use ResNet-10 with GroupNorm per
camera, then a learned spatial embedding of its feature map and a bottleneck; the state is appended to the
image features. The learned reward's success classifier (`user.rewards.classifier`) uses ResNet-18 with
batch norm.

GroupNorm (not BatchNorm) keeps every piece of the encoder a parameter, so the whole actor stays in one flat
weight buffer and behaves the same in training and acting. Pretrained trunk weights come only from a LOCAL
file (`torch.save` of `ResNet.state_dict()`); nothing is ever downloaded.

The learner may run each camera's encoder in bfloat16 autocast and feed it channels-last images
(`ImageStateEncoder.set_speed`, from `user.learner.speed`); its output is float32 either way, so what follows
(the MLP heads, the critics, every loss) stays in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Protocol

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.config import setting
from user.policies.base import Encoder, PolicyError, TensorObs

Norm = Literal["batch", "group"]
"""The normalisation after each convolution: BatchNorm2d (running statistics) or GroupNorm (parameters only)."""

RESNET10: tuple[int, ...] = (1, 1, 1, 1)
"""Basic blocks per stage of ResNet-10: 1 stem + 4 x 2 block convolutions + 1 head = 10 layers."""
RESNET18: tuple[int, ...] = (2, 2, 2, 2)
"""Basic blocks per stage of ResNet-18: 1 stem + 8 x 2 block convolutions + 1 head = 18 layers."""


class ResNetLayout(Protocol):
    """What a `ResNet` is built from: stage widths, blocks per stage (the depth), stem width, normalisation."""

    @property
    def channels(self) -> tuple[int, ...]: ...
    @property
    def blocks(self) -> tuple[int, ...]: ...
    @property
    def stem_channels(self) -> int: ...
    @property
    def norm(self) -> Norm: ...
    @property
    def groups(self) -> int: ...


def check_layout(layout: ResNetLayout) -> None:
    """Raise ValueError when `layout` cannot make a ResNet (used by the configs' `__post_init__`)."""
    if len(layout.channels) != len(layout.blocks) or not layout.channels:
        raise ValueError("channels and blocks must be non-empty and of the same length")
    if min(layout.blocks) < 1 or min(layout.channels) < 1 or layout.stem_channels < 1:
        raise ValueError("every stage needs at least one block and one channel, the stem at least one channel")
    if layout.norm not in ("batch", "group"):
        raise ValueError(f"norm must be 'batch' or 'group', not {layout.norm!r}")
    if layout.norm == "group" and any(c % layout.groups for c in (layout.stem_channels, *layout.channels)):
        raise ValueError(f"groups ({layout.groups}) must divide stem_channels and every stage's channels")


@dataclass(frozen=True)
class ResNetSpec:
    """A ResNet layout given directly (not through `ImageEncoderConfig`), e.g. the reward's ResNet-18."""

    channels: tuple[int, ...]
    blocks: tuple[int, ...]
    stem_channels: int
    norm: Norm = "batch"
    groups: int = 1

    def __post_init__(self) -> None:
        check_layout(self)

    @staticmethod
    def standard(blocks: tuple[int, ...], width: int = 64, norm: Norm = "batch") -> ResNetSpec:
        """He et al.'s widths: a `width`-channel stem, then stages of width * (1, 2, 4, 8) channels."""
        if width < 1:
            raise ValueError("width must be >= 1")
        return ResNetSpec(tuple(width * 2**k for k in range(len(blocks))), blocks, width, norm)


def norm_layer(norm: Norm, channels: int, groups: int) -> nn.Module:
    """The normalisation of `channels` feature maps that follows a convolution."""
    if norm == "batch":
        return nn.BatchNorm2d(channels)
    return nn.GroupNorm(groups, channels)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions, each normalised, and a residual (1x1 projection when the shape changes)."""

    def __init__(self, c_in: int, c_out: int, stride: int, *, norm: Norm, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.norm1 = norm_layer(norm, c_out, groups)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.norm2 = norm_layer(norm, c_out, groups)
        self.project: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.project = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), norm_layer(norm, c_out, groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        out: torch.Tensor = F.relu(y + self.project(x))
        return out


def stem(c_in: int, c_out: int, *, norm: Norm, groups: int) -> nn.Sequential:
    """The ResNet stem: 7x7 stride-2 convolution, normalisation, ReLU, 3x3 stride-2 max-pool (1/4 resolution)."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 7, 2, 3, bias=False), norm_layer(norm, c_out, groups), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
    )


def stage(c_in: int, c_out: int, blocks: int, stride: int, *, norm: Norm, groups: int) -> nn.Sequential:
    """`blocks` basic blocks; the first one takes the stride and the change of width."""
    return nn.Sequential(
        *(
            BasicBlock(c_in if b == 0 else c_out, c_out, stride if b == 0 else 1, norm=norm, groups=groups)
            for b in range(blocks)
        )
    )


class ResNet(nn.Module):
    """(B, C, H, W) -> (B, channels[-1], h, w): the stem, then the stages (stride 1, 2, 2, ...); no head.

    The state_dict keys are `stem.<i>.*` and `stages.<stage>.<block>.{conv1,norm1,conv2,norm2,project}.*`."""

    def __init__(self, layout: ResNetLayout, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = stem(in_channels, layout.stem_channels, norm=layout.norm, groups=layout.groups)
        stages: list[nn.Module] = []
        c_in = layout.stem_channels
        for k, (c_out, n) in enumerate(zip(layout.channels, layout.blocks, strict=True)):
            stages.append(stage(c_in, c_out, n, 1 if k == 0 else 2, norm=layout.norm, groups=layout.groups))
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.blocks = tuple(layout.blocks)
        self.out_channels = c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.stages(self.stem(x))
        return out


@dataclass(frozen=True)
class ImageEncoderConfig:
    """The per-camera ResNet encoder (a `ResNetLayout`: GroupNorm, ResNet-10 unless `blocks` says otherwise)."""

    norm: ClassVar[Norm] = "group"  # not a setting: BatchNorm's running statistics would not be flat weights
    channels: tuple[int, ...] = setting((64, 128, 256, 512), "output channels of each ResNet stage")
    blocks: tuple[int, ...] = setting(RESNET10, "basic blocks per stage ((1, 1, 1, 1) = ResNet-10)")
    stem_channels: int = setting(64, "channels of the 7x7 stride-2 stem convolution", min=1)
    groups: int = setting(4, "GroupNorm groups (must divide every channel count)", min=1)
    spatial_features: int = setting(8, "learned spatial-embedding maps per trunk channel", min=1)
    bottleneck: int = setting(256, "width of each camera's embedding (Linear + LayerNorm + tanh)", min=1)
    pretrained: str | None = setting(None, "local file with trunk weights (ResNet state_dict); null = random")
    freeze_pretrained: bool = setting(True, "keep loaded trunk weights fixed (no gradient)")

    def __post_init__(self) -> None:
        check_layout(self)


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
        self.autocast: torch.dtype | None = None  # the camera encoders run in this autocast dtype; None = float32
        self.channels_last = False  # images enter the convolutions in channels-last memory format

    def set_speed(self, *, autocast: torch.dtype | None, channels_last: bool) -> None:
        """Run the camera encoders in `autocast` (None: float32) on `channels_last` images; the output stays float32."""
        self.autocast = autocast
        self.channels_last = channels_last

    def _camera(self, camera: str, images: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        if self.autocast is None:
            out: torch.Tensor = self.encoders[camera](images)
            return out
        with torch.autocast(images.device.type, dtype=self.autocast):
            return self.encoders[camera](images).float()  # type: ignore[no-any-return]

    def forward(self, obs: TensorObs) -> torch.Tensor:
        if obs.state.shape[-1] != self.state_dim:
            raise PolicyError(f"state has {obs.state.shape[-1]} entries, the policy expects {self.state_dim}")
        missing = [c for c in self.cameras if c not in obs.images]
        if missing:
            raise PolicyError(f"observation has no image from camera {missing[0]!r}")
        feats = [self._camera(c, obs.images[c]) for c in self.cameras]
        return torch.cat([*feats, obs.state], dim=-1)
