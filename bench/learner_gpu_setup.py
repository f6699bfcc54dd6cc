"""What bench/learner_gpu.py and its DDP part train and time: the sizes (full or dry run), synthetic host batches,
the naive or tuned image SAC/RLPD update (`Runner`) and one timed trial. See learner_gpu.py's docstring."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from user.algorithms.base import to_torch
from user.algorithms.rlpd import RLPDConfig
from user.algorithms.sac import SAC, SACConfig
from user.learner.prefetch import Prefetcher
from user.learner.speed import FastUpdate, SpeedPlan
from user.policies.cnn import CNNPolicy, CNNPolicyConfig
from user.policies.preprocess import ObservationConfig
from user.policies.resnet import ImageEncoderConfig

CAMERAS = ("left", "right")
STATE_DIM = 17
ACTION_DIM = 7
CRITICS = 10


@dataclass(frozen=True)
class Sizes:
    """What one run trains on: the full GPU sizes or the dry run's tiny ones."""

    image: int
    batch: int
    critic_hidden: tuple[int, ...]
    encoder: ImageEncoderConfig
    rounds: int
    updates: int  # update calls per trial
    warmup: int  # update calls before the rounds (compiling happens here)


FULL = Sizes(128, 256, (256, 256), ImageEncoderConfig(), rounds=7, updates=30, warmup=8)
DRY = Sizes(
    16,
    8,
    (16,),
    ImageEncoderConfig(channels=(4, 4, 8, 8), stem_channels=4, groups=2, spatial_features=2, bottleneck=8),
    rounds=2,
    updates=2,
    warmup=2,
)


@dataclass
class HostBatch:
    """What `to_torch` reads of a buffer batch (the buffer itself needs storage libraries this machine may lack)."""

    state: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_state: np.ndarray
    terminated: np.ndarray
    is_demo: np.ndarray
    intervened: np.ndarray
    images: dict[str, np.ndarray]
    next_images: dict[str, np.ndarray]
    action_chunk: np.ndarray | None = None  # no action chunks: an image SAC/RLPD learner's batch
    chunk_mask: np.ndarray | None = None
    chunk_intervened: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.action)


def host_batch(sizes: Sizes, seed: int) -> HostBatch:
    rng = np.random.default_rng(seed)
    n = sizes.batch

    def pixels() -> dict[str, np.ndarray]:
        return {c: rng.integers(0, 256, (n, sizes.image, sizes.image, 3), dtype=np.uint8) for c in CAMERAS}

    return HostBatch(
        state=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
        action=rng.uniform(-0.9, 0.9, (n, ACTION_DIM)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_state=rng.normal(size=(n, STATE_DIM)).astype(np.float32),
        terminated=rng.random(n) < 0.05,
        is_demo=np.arange(n) % 2 == 0,
        intervened=np.zeros(n, bool),
        images=pixels(),
        next_images=pixels(),
    )


def make_algorithm(kind: str, sizes: Sizes, device: torch.device) -> SAC:
    obs = ObservationConfig(cameras=CAMERAS, image_size=sizes.image)
    cfg = CNNPolicyConfig(state_dim=STATE_DIM, action_dim=ACTION_DIM, observation=obs, encoder=sizes.encoder)
    policy = CNNPolicy(cfg).to(device)  # before the algorithm: its optimisers hold the parameters
    common: dict[str, Any] = {"batch_size": sizes.batch, "num_critics": CRITICS, "critic_hidden": sizes.critic_hidden}
    algo_cfg = RLPDConfig(**common) if kind == "RLPD" else SACConfig(**common)
    return algo_cfg.build(policy, seed=0)


class Runner:
    """One setup: an algorithm and its update step (naive or tuned) over a cycle of host batches."""

    def __init__(self, kind: str, tuned: bool, sizes: Sizes, device: torch.device, batches: list[HostBatch]) -> None:
        self.label = f"image {kind}, {'tuned' if tuned else 'naive'}"
        self.device = device
        self.algo = make_algorithm(kind, sizes, device)
        self._batches = batches
        self._k = 0
        self.fast: FastUpdate | None = None
        self.prefetcher: Prefetcher[HostBatch] | None = None
        if tuned:
            plan = SpeedPlan(prefetch=True, autocast=torch.bfloat16, channels_last=True, compile=True)
            self.fast = fast = FastUpdate(self.algo, plan)
            self.prefetcher = Prefetcher(self._draw, fast.prepare, device, depth=2)  # type: ignore[arg-type]

    def _draw(self, timeout_s: float) -> HostBatch:
        self._k += 1
        return self._batches[self._k % len(self._batches)]

    def step(self) -> None:
        if self.fast is None or self.prefetcher is None:
            batch = self._batches[self._k % len(self._batches)]
            self._k += 1
            self.algo.update_tensors(to_torch(batch, self.algo.policy))  # type: ignore[arg-type]
            return
        self.fast.update_prepared(self.prefetcher.get(timeout_s=60.0).batch())

    def close(self) -> None:
        if self.prefetcher is not None:
            self.prefetcher.close()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def trial(step: Callable[[], None], updates: int, device: torch.device, after: Callable[[], object] | None) -> float:
    """Update calls per second over `updates` calls (`after` each one: the publication under test)."""
    sync(device)
    start = time.perf_counter()
    for _ in range(updates):
        step()
        if after is not None:
            after()
    sync(device)
    return updates / (time.perf_counter() - start)


def warm(runner: Runner, updates: int) -> float:
    start = time.perf_counter()
    for _ in range(updates):
        runner.step()
    sync(runner.device)
    return time.perf_counter() - start


def over(k: int, rounds: int, deadline: float) -> bool:
    """Whether round `k` is past the time budget (round 0 always runs); says so when it is."""
    if k == 0 or time.perf_counter() <= deadline:
        return False
    print(f"time budget: stopped after {k} of {rounds} rounds")
    return True


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")
