"""`user train-reward`: train the ResNet-18 success classifier on a replay buffer's episodes."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from user.buffer.errors import BufferError
from user.config.strict import ConfigError
from user.rewards.base import RewardError
from user.rewards.classifier import ClassifierConfig, SuccessClassifier
from user.rewards.labels import LabelConfig, buffer_frames

_log = logging.getLogger("user.rewards")
EXIT_ERROR = 2


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "train-reward",
        help="train the learned success reward from a buffer (see user.rewards.labels for the labelling)",
    )
    p.add_argument("directory", type=Path, help="replay buffer directory")
    p.add_argument("--out", type=Path, required=True, help="checkpoint file to write")
    p.add_argument("--camera", default="front")
    p.add_argument("--task", default=None, help="only this task's episodes")
    p.add_argument("--positive-tail", type=int, default=5, help="most positive frames per successful episode")
    p.add_argument("--margin", type=int, default=5, help="steps before success left unlabelled")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--width", type=int, default=16, help="ResNet-18 width (64 = standard)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    try:
        labels = LabelConfig(args.camera, args.positive_tail, args.margin, args.task)
        frames, y = buffer_frames(args.directory, labels)
        print(f"frames: {len(y)} ({int(y.sum())} positive, {int((~y).sum())} negative)")
        clf = SuccessClassifier(
            ClassifierConfig(
                camera=args.camera, image_size=args.image_size, width=args.width, epochs=args.epochs, seed=args.seed
            )
        )
        report = clf.fit(frames, y)
        clf.save(args.out)
    except (RewardError, BufferError, ConfigError, OSError) as exc:
        _log.error("%s", exc)
        return EXIT_ERROR
    print(
        f"best epoch {report.best_epoch}: validation accuracy {report.val_accuracy:.3f}, balanced "
        f"{report.val_balanced_accuracy:.3f}, on {report.val_frames} frames"
    )
    print(f"wrote {args.out}")
    return 0
