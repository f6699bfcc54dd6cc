"""Where the learner trains: a device name from the config, checked against what this machine has."""

from __future__ import annotations

import torch

from user.config.strict import ConfigError

DEVICE_HELP = "where the learner trains: cpu, cuda, cuda:N, or auto (the first GPU when there is one, else cpu)"
THREADS_HELP = "torch CPU threads; 0 = every usable core but one (at least 1), which robots, rollout and router get"


def training_threads(setting: int, cores: int) -> int:
    """The learner's torch threads: `setting`, or with 0 all of `cores` but one. Measured on 2 cores (BENCHMARKS.md,
    parity): torch's 2 threads beside the robot, rollout and router processes wait on the thread the others
    preempt at every operation, so one thread trains faster there (15.4 against 16.4-20.2 ms a step)."""
    return setting if setting > 0 else max(1, cores - 1)


def resolve_device(name: str) -> torch.device:
    """`cpu`, `cuda`, `cuda:N` or `auto` -> a usable torch device; a GPU that is not there is a ConfigError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"device {name!r} is not a torch device name (cpu, cuda, cuda:N or auto): {exc}") from exc
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ConfigError(f"device {name!r}: only cpu, cuda, cuda:N and auto are supported")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: this machine has no CUDA GPU (torch {torch.__version__}); use cpu or auto")
    index = device.index if device.index is not None else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device
