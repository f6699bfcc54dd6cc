"""Learner checkpoints: everything needed to continue a run where it stopped.

A checkpoint is one torch file holding the algorithm's state (policy, critics, targets, optimisers,
temperature, counters, RNG), the replay buffer's sampler/rate-limiter state (the data itself is the
persistent buffer on disk), the trainer's counters and the learner's own counters. It is written to a
temporary file, fsynced and renamed over `latest.pt`, so a crash while saving (kill -9 included) leaves the
previous checkpoint intact; the newest `keep` numbered copies are kept beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from user.learner.trainer import TrainerCounters

_log = logging.getLogger("user.learner.checkpoint")

LATEST = "latest.pt"
_NUMBERED = re.compile(r"^step_(\d+)\.pt$")
FORMAT = 1


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read or does not fit this learner."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (a full or failing disk); the previous one is unchanged."""


@dataclass
class LearnerCounters:
    """The learner's own progress besides the trainer's."""

    env_steps: int = 0  # transitions received and stored
    episodes: int = 0  # episodes completed and stored
    successes: int = 0  # of those, successful
    policy_version: int = 0  # newest version published


@dataclass
class Checkpoint:
    algorithm: dict[str, Any]
    buffer: dict[str, Any]
    trainer: TrainerCounters
    learner: LearnerCounters
    policy_id: str


class CheckpointStore:
    """`directory/latest.pt` and numbered copies `step_<update calls>.pt`."""

    def __init__(self, directory: str | Path, keep: int = 3) -> None:
        self.directory = Path(directory)
        self.keep = keep

    @property
    def latest(self) -> Path:
        return self.directory / LATEST

    def exists(self) -> bool:
        return self.latest.is_file()

    def save(self, checkpoint: Checkpoint) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = {
            "format": FORMAT,
            "policy_id": checkpoint.policy_id,
            "algorithm": checkpoint.algorithm,
            "buffer": checkpoint.buffer,
            "trainer": dataclasses.asdict(checkpoint.trainer),
            "learner": dataclasses.asdict(checkpoint.learner),
        }
        tmp = self.directory / f".{LATEST}.tmp"
        try:
            with open(tmp, "wb") as f:
                torch.save(payload, f)  # a full disk raises OSError, or RuntimeError from torch's zip writer
                f.flush()
                os.fsync(f.fileno())
        except (OSError, RuntimeError) as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise CheckpointWriteError(
                f"no checkpoint written to {self.directory} ({type(exc).__name__}: {exc}); {LATEST} is unchanged"
            ) from exc
        numbered = self.directory / f"step_{checkpoint.trainer.update_calls}.pt"
        os.replace(tmp, self.latest)
        try:
            if numbered.exists():
                numbered.unlink()
            os.link(self.latest, numbered)
        except OSError as exc:  # a file system without hard links: the latest copy is what matters
            _log.debug("no numbered copy of the checkpoint: %s", exc)
        self._prune()
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return self.latest

    def load(self, policy_id: str) -> Checkpoint:
        try:
            payload = torch.load(self.latest, weights_only=False, map_location="cpu")
        except (OSError, RuntimeError, EOFError) as exc:
            raise CheckpointError(f"{self.latest}: cannot read the checkpoint ({exc})") from exc
        if payload.get("format") != FORMAT:
            raise CheckpointError(f"{self.latest}: checkpoint format {payload.get('format')!r}, expected {FORMAT}")
        if payload["policy_id"] != policy_id:
            raise CheckpointError(
                f"{self.latest}: checkpoint of policy {payload['policy_id']!r}, this learner trains {policy_id!r}"
            )
        return Checkpoint(
            algorithm=payload["algorithm"],
            buffer=payload["buffer"],
            trainer=TrainerCounters(**payload["trainer"]),
            learner=LearnerCounters(**payload["learner"]),
            policy_id=payload["policy_id"],
        )

    def _prune(self) -> None:
        numbered = sorted(
            ((int(m.group(1)), p) for p in self.directory.iterdir() if (m := _NUMBERED.match(p.name))),
            reverse=True,
        )
        for _, path in numbered[self.keep :]:
            path.unlink(missing_ok=True)
