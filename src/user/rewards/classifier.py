"""Learned success reward: a ResNet-18 binary classifier on camera frames, its training, and `LearnedReward`.

Training is plain supervised learning on labelled frames (see `user.rewards.labels` for how buffer episodes
become labelled frames): Adam on binary cross-entropy, a seeded shuffle, the best epoch kept by accuracy on
a held-out split. `LearnedReward` thresholds the success probability: in step mode every step gets
`1.0` when the frame looks successful (else 0); in terminal mode only an episode's last step is scored.
"""

from __future__ import annotations

import logging
import pickle
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from user.config import from_mapping, setting
from user.policies.resnet import RESNET18, ResNet, ResNetSpec
from user.rewards.base import RewardError, RewardMode, RewardStep, RewardValue

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClassifierConfig:
    """The success classifier and how it is trained."""

    camera: str = setting("front", "camera whose frames are classified")
    image_size: int = setting(64, "frames are resized to image_size x image_size", min=16, max=512)
    width: int = setting(16, "ResNet-18 width (64 = the standard network)", min=1, max=128)
    epochs: int = setting(8, "passes over the training frames", min=1)
    batch_size: int = setting(32, "frames per gradient step", min=1)
    lr: float = setting(1e-3, "Adam learning rate", min=0.0)
    weight_decay: float = setting(1e-4, "Adam weight decay", min=0.0)
    val_fraction: float = setting(0.2, "share of frames held out to pick the best epoch", min=0.0, max=0.9)
    seed: int = setting(0, "seed of the initialisation, split and shuffles")


@dataclass(frozen=True)
class TrainReport:
    """How training went."""

    train_frames: int
    val_frames: int
    best_epoch: int
    val_accuracy: float  # NaN without a validation split
    train_accuracy: float
    val_balanced_accuracy: float = float("nan")  # mean of the per-class accuracies (what the best epoch is chosen by)


class SuccessNet(nn.Module):
    """(B, C, H, W) images -> (B,) success logits: a ResNet-18 trunk with batch norm, global average pooling, one logit.

    `width` scales every stage (64, 128, 256, 512 channels at 64 = the standard network; 16 gives a
    1/16-compute ResNet-18 that trains on a CPU in seconds on small images)."""

    def __init__(self, width: int = 64, in_channels: int = 3) -> None:
        super().__init__()
        self.trunk = ResNet(ResNetSpec.standard(RESNET18, width, norm="batch"), in_channels)
        self.head = nn.Linear(self.trunk.out_channels, 1)
        self.out_features = self.trunk.out_channels

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, 8 * width) pooled features."""
        out: torch.Tensor = self.trunk(x).mean(dim=(2, 3))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.head(self.features(x)).squeeze(-1)
        return logits


_FLAT_BLOCK = re.compile(r"stages\.(\d+)\.(conv1|bn1|conv2|bn2|shortcut)\.(.+)")
_RENAMED = {"bn1": "norm1", "bn2": "norm2", "shortcut": "project"}


def upgrade_state_dict(state: Mapping[str, torch.Tensor], blocks: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """A `SuccessNet` state_dict from a classifier file written before the ResNets were one family -> today's keys.

    Those files kept `stem.*`, `stages.<i>.{conv1,bn1,conv2,bn2,shortcut}.*` (blocks numbered 0..7 across the
    stages) and `head.*`; today the ResNet sits under `trunk.` and names blocks `stages.<stage>.<block>` with
    `norm1`, `norm2`, `project`. Tensors, their order and the network are unchanged. Today's keys pass as they are."""
    if any(key.startswith("trunk.") for key in state):
        return dict(state)
    where = [(s, b) for s, n in enumerate(blocks) for b in range(n)]
    out: dict[str, torch.Tensor] = {}
    for old, value in state.items():
        m = _FLAT_BLOCK.fullmatch(old)
        key = old
        if m and int(m[1]) < len(where):
            s, b = where[int(m[1])]
            key = f"stages.{s}.{b}.{_RENAMED.get(m[2], m[2])}.{m[3]}"
        out[key if key.startswith("head.") else f"trunk.{key}"] = value
    return out


def to_input(frames: npt.NDArray[np.uint8], image_size: int) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, s, s) float in [-1, 1]."""
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise RewardError(f"frames must be (N, H, W, 3) RGB, got shape {frames.shape}")
    x = torch.as_tensor(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).to(torch.float32) / 127.5 - 1.0
    if tuple(x.shape[-2:]) != (image_size, image_size):
        x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False, antialias=True)
    return x


class SuccessClassifier:
    """ResNet-18 on one camera's frames -> probability that the task is achieved."""

    def __init__(self, config: ClassifierConfig | None = None) -> None:
        self.config = config or ClassifierConfig()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed)
            self.net = SuccessNet(self.config.width)
        self.net.eval()

    def probability(self, frames: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
        """(N, H, W, 3) uint8 -> (N,) success probabilities."""
        self.net.eval()
        with torch.no_grad():
            out: npt.NDArray[np.float32] = torch.sigmoid(self.net(to_input(frames, self.config.image_size))).numpy()
        return out

    def save(self, path: str | Path) -> None:
        torch.save({"config": asdict(self.config), "state_dict": self.net.state_dict()}, Path(path))

    @staticmethod
    def load(path: str | Path) -> SuccessClassifier:
        try:
            blob: dict[str, Any] = torch.load(Path(path), map_location="cpu", weights_only=True)
        except (OSError, RuntimeError, pickle.UnpicklingError) as exc:
            raise RewardError(f"{path}: cannot read the reward classifier ({exc})") from exc
        try:
            clf = SuccessClassifier(from_mapping(ClassifierConfig, blob["config"], where=str(path)))
            clf.net.load_state_dict(upgrade_state_dict(blob["state_dict"], clf.net.trunk.blocks))
        except (KeyError, TypeError, RuntimeError) as exc:
            raise RewardError(f"{path}: not a reward classifier written by `user train-reward` ({exc})") from exc
        return clf

    def fit(self, frames: npt.NDArray[np.uint8], labels: npt.NDArray[np.bool_]) -> TrainReport:
        """Train on labelled frames (both classes needed); keeps the weights of the best validation epoch (of
        equally good epochs the latest, the most trained: an early tie can sit at the decision boundary).

        Success frames are rare in robot data (a successful episode ends at its first success), so the loss
        weighs the positive class by negatives/positives and epochs are compared by balanced accuracy; plain
        accuracy would reward a classifier that never says "success"."""
        c = self.config
        if len(frames) != len(labels):
            raise RewardError(f"{len(frames)} frames but {len(labels)} labels")
        if not labels.any() or labels.all():
            raise RewardError("training needs both successful and unsuccessful frames")
        rng = np.random.default_rng(c.seed)
        order = rng.permutation(len(frames))
        n_val = round(c.val_fraction * len(frames))
        val, train = order[:n_val], order[n_val:]
        x = to_input(frames, c.image_size)
        y = torch.as_tensor(labels.astype(np.float32))
        optim = torch.optim.Adam(self.net.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        gen = torch.Generator().manual_seed(c.seed)
        positives = float(y[train].sum())
        pos_weight = torch.tensor((len(train) - positives) / max(positives, 1.0))
        best: tuple[float, int, dict[str, torch.Tensor]] = (-1.0, -1, {})
        for epoch in range(c.epochs):
            self._epoch(x[train], y[train], optim, gen, pos_weight)
            score = self._balanced(x[val], y[val]) if n_val else self._balanced(x[train], y[train])
            _log.info("reward classifier epoch %d: balanced accuracy %.3f", epoch, score)
            if score >= best[0]:
                best = (score, epoch, {k: v.detach().clone() for k, v in self.net.state_dict().items()})
        self.net.load_state_dict(best[2])
        self.net.eval()
        val_acc = self._accuracy(x[val], y[val]) if n_val else float("nan")
        val_bal = self._balanced(x[val], y[val]) if n_val else float("nan")
        return TrainReport(len(train), n_val, best[1], val_acc, self._accuracy(x[train], y[train]), val_bal)

    def _epoch(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        optim: torch.optim.Optimizer,
        gen: torch.Generator,
        pos_weight: torch.Tensor | None = None,
    ) -> None:
        self.net.train()
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), self.config.batch_size):
            idx = perm[i : i + self.config.batch_size]
            if len(idx) < 2:  # batch norm needs two samples
                continue
            xb = x[idx]
            if torch.rand((), generator=gen) < 0.5:  # horizontal flip: the cheapest augmentation that helps
                xb = xb.flip(-1)
            loss = F.binary_cross_entropy_with_logits(self.net(xb), y[idx], pos_weight=pos_weight)
            optim.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optim.step()

    def _balanced(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Mean of the accuracy on positives and on negatives (NaN parts, a class absent, are left out)."""
        self.net.eval()
        with torch.no_grad():
            predicted = self.net(x) >= 0
        truth = y >= 0.5
        parts = [float((predicted[truth == c] == c).float().mean()) for c in (True, False) if bool((truth == c).any())]
        return float(np.mean(parts)) if parts else float("nan")

    def _accuracy(self, x: torch.Tensor, y: torch.Tensor) -> float:
        self.net.eval()
        with torch.no_grad():
            return float(((self.net(x) >= 0).float() == y).float().mean()) if len(y) else float("nan")


class LearnedReward:
    """Reward 1 when the classifier says the frame shows success (probability >= threshold), else 0."""

    needs_images = True

    def __init__(self, classifier: SuccessClassifier, threshold: float = 0.5, mode: RewardMode = RewardMode.STEP):
        self.classifier = classifier
        self.threshold = threshold
        self.mode = mode

    def __call__(self, step: RewardStep) -> RewardValue:
        if self.mode is RewardMode.TERMINAL and not step.last:
            return RewardValue(0.0, False)
        camera = self.classifier.config.camera
        if camera not in step.images:
            raise RewardError(f"the learned reward needs camera {camera!r}; the step has {sorted(step.images)}")
        p = float(self.classifier.probability(step.images[camera][None])[0])
        success = p >= self.threshold
        return RewardValue(float(success), success)

    def reset(self) -> None:
        """Stateless."""
