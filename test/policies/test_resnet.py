"""The ResNet family: ResNet-10 (GroupNorm, the CNN policies' trunk) and ResNet-18 (batch norm, the reward's
classifier) are two layouts of one `ResNet`; the policy trunk keeps the keys, order and init of its weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.policies.resnet import RESNET10, RESNET18, BasicBlock, ImageEncoderConfig, ResNet, ResNetSpec

TINY = ImageEncoderConfig(channels=(8, 8, 16, 16), stem_channels=8, groups=2, spatial_features=2, bottleneck=8)


def _blocks_per_stage(net: ResNet) -> list[int]:
    return [sum(isinstance(m, BasicBlock) for m in s.children()) for s in net.stages.children()]


def _norm_kinds(net: ResNet) -> set[type[nn.Module]]:
    return {type(m) for m in net.modules() if isinstance(m, nn.BatchNorm2d | nn.GroupNorm)}


def test_resnet10_with_group_norm_is_the_policy_trunk() -> None:
    net = ResNet(TINY)
    assert TINY.blocks == RESNET10 and TINY.norm == "group"
    assert _blocks_per_stage(net) == [1, 1, 1, 1]
    assert _norm_kinds(net) == {nn.GroupNorm}
    assert all(m.num_groups == 2 for m in net.modules() if isinstance(m, nn.GroupNorm))
    assert not list(net.buffers())  # every piece a parameter: the actor stays one flat weight buffer
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 16, 1, 1) and net.out_channels == 16


def test_resnet18_with_batch_norm_is_the_classifier_trunk() -> None:
    spec = ResNetSpec.standard(RESNET18, width=4, norm="batch")
    assert spec.channels == (4, 8, 16, 32) and spec.stem_channels == 4
    net = ResNet(spec)
    assert _blocks_per_stage(net) == [2, 2, 2, 2]
    assert _norm_kinds(net) == {nn.BatchNorm2d}
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d) and m.kernel_size != (1, 1)]
    assert len(convs) == 17  # stem + 8 blocks x 2
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 32, 1, 1)


def test_depth_and_norm_are_parameters() -> None:
    net = ResNet(ResNetSpec((4, 8, 8), (3, 1, 2), 4, norm="group", groups=2), in_channels=1)
    assert _blocks_per_stage(net) == [3, 1, 2] and net.blocks == (3, 1, 2)
    assert _norm_kinds(net) == {nn.GroupNorm}
    assert net(torch.zeros(1, 1, 32, 32)).shape == (1, 8, 2, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"channels": (4, 8), "blocks": (1,)}, "same length"),
        ({"channels": (4,), "blocks": (0,)}, "at least one block"),
        ({"channels": (4, 6), "blocks": (1, 1), "norm": "group", "groups": 4}, "must divide"),
        ({"channels": (4,), "blocks": (1,), "norm": "layer"}, "norm must be"),
    ],
)
def test_a_bad_layout_is_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ResNetSpec(stem_channels=4, **kwargs)  # type: ignore[arg-type]


def test_standard_width_must_be_positive() -> None:
    with pytest.raises(ValueError, match="width"):
        ResNetSpec.standard(RESNET10, width=0)


class _OldBlock(nn.Module):
    """The policy's basic block before the family was shared (frozen copy)."""

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
        return F.relu(self.norm2(self.conv2(y)) + self.project(x))


class _OldResNet(nn.Module):
    """The policy's ResNet-10 trunk before the family was shared (frozen copy)."""

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
                _OldBlock(c_in if b == 0 else c_out, c_out, 2 if k > 0 and b == 0 else 1, cfg.groups) for b in range(n)
            ]
            stages.append(nn.Sequential(*blocks))
            c_in = c_out
        self.stages = nn.Sequential(*stages)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.stages(self.stem(x))
        return out


@pytest.mark.parametrize("blocks", [RESNET10, (2, 1, 1, 2)])
def test_old_policy_trunk_weights_load_and_give_the_same_features(blocks: tuple[int, ...]) -> None:
    cfg = ImageEncoderConfig(**{**TINY.__dict__, "blocks": blocks})
    torch.manual_seed(3)
    old = _OldResNet(cfg)
    torch.manual_seed(3)
    new = ResNet(cfg)
    old_state, new_state = old.state_dict(), new.state_dict()
    assert list(new_state) == list(old_state)  # same keys in the same order: flat weights and optimizers line up
    assert all(torch.equal(new_state[k], v) for k, v in old_state.items())  # and the same seeded init
    with torch.no_grad():
        for p in old.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    new.load_state_dict(old.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(new(x), old(x), rtol=0, atol=0)
