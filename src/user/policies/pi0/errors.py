"""Errors of the π0 model: bad settings or inputs, and checkpoint directories that do not fit."""

from __future__ import annotations

from pathlib import Path

from user.policies.base import PolicyError


class Pi0Error(PolicyError):
    """A π0 model was given settings or inputs that do not fit it."""


class CheckpointError(Pi0Error):
    """A π0 checkpoint directory is missing a file or holds one that does not match the model."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"π0 checkpoint {path}: {problem}")
        self.path = path
        self.problem = problem
