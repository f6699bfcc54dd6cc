"""ResNet-18 (He et al. 2016) in plain torch, with a width option, as a binary success classifier.

The layout is the standard one: a 7x7 stride-2 stem and max-pool, four stages of two basic blocks
(64, 128, 256, 512 channels at `width=64`), global average pooling, then one logit. `width` scales every
stage (e.g. 16 gives a 1/16-compute ResNet-18 that trains on a CPU in seconds on small images).
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a residual connection (1x1 projection when shapes change)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class ResNet18(nn.Module):
    """(B, C, H, W) images -> (B,) success logits."""

    def __init__(self, width: int = 64, in_channels: int = 3) -> None:
        super().__init__()
        if width < 1:
            raise ValueError("width must be >= 1")
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        cin = width
        for stage, mult in enumerate((1, 2, 4, 8)):
            cout = width * mult
            for i in range(2):
                blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and i == 0 else 1))
                cin = cout
        self.stages = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, 1)
        self.out_features = cin

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, 8 * width) pooled features."""
        out: torch.Tensor = self.stages(self.stem(x)).mean(dim=(2, 3))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(x)).squeeze(-1)
        return logits
