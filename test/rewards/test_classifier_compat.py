"""Classifier files written before the ResNets were one family (flat `stages.<i>.bn1` keys, no `trunk.`) still
load and classify exactly as before; the shared ResNet-18 keeps the old init for a given seed."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import nn

from user.rewards.classifier import ClassifierConfig, SuccessClassifier, SuccessNet, to_input, upgrade_state_dict


class _OldBlock(nn.Module):
    """The classifier's basic block before the family was shared (frozen copy)."""

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
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class _OldResNet18(nn.Module):
    """The classifier's ResNet-18 before the family was shared (frozen copy)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        cin = width
        for stage, mult in enumerate((1, 2, 4, 8)):
            for i in range(2):
                blocks.append(_OldBlock(cin, width * mult, 2 if stage > 0 and i == 0 else 1))
                cin = width * mult
        self.stages = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.stages(self.stem(x)).mean(dim=(2, 3))).squeeze(-1)
        return out


def test_same_seed_same_init_and_the_old_keys_map_onto_the_new() -> None:
    torch.manual_seed(5)
    old = _OldResNet18(4)
    torch.manual_seed(5)
    new = SuccessNet(4)
    mapped = upgrade_state_dict(old.state_dict(), new.trunk.blocks)
    assert list(mapped) == list(new.state_dict())  # every tensor, in the same order
    assert all(torch.equal(v, mapped[k]) for k, v in new.state_dict().items())
    assert "trunk.stages.3.1.norm2.running_var" in mapped and "trunk.stages.1.0.project.1.weight" in mapped
    assert upgrade_state_dict(new.state_dict(), new.trunk.blocks).keys() == new.state_dict().keys()  # new passes


def test_a_classifier_file_in_the_old_layout_loads_and_classifies_as_before(tmp_path: Path) -> None:
    config = ClassifierConfig(width=2, image_size=16)
    torch.manual_seed(1)
    old = _OldResNet18(config.width)
    old.train()
    with torch.no_grad():
        for _ in range(3):  # non-trivial batch-norm running statistics
            old(torch.randn(8, 3, 16, 16))
    old.eval()
    torch.save({"config": asdict(config), "state_dict": old.state_dict()}, tmp_path / "old.pt")
    frames = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    loaded = SuccessClassifier.load(tmp_path / "old.pt")
    with torch.no_grad():
        expected = torch.sigmoid(old(to_input(frames, config.image_size))).numpy()
    np.testing.assert_allclose(loaded.probability(frames), expected, rtol=0, atol=1e-7)
    loaded.save(tmp_path / "new.pt")  # written again in today's layout, it still loads
    again = SuccessClassifier.load(tmp_path / "new.pt")
    np.testing.assert_array_equal(again.probability(frames), loaded.probability(frames))
