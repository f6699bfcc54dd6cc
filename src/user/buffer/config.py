"""Settings of the replay buffer, loaded through `user.config.strict` (unknown keys are errors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from user.config.strict import ConfigError, setting

FsyncPolicy = Literal["episode", "segment", "never"]
SamplerKind = Literal["auto", "uniform", "recent", "staleness", "demo_ratio", "intervention"]
BALANCED_KINDS = ("auto", "demo_ratio", "uniform")  # the rules a task-balanced batch applies within each task


@dataclass(frozen=True)
class StorageConfig:
    """Where and how transitions are kept on disk and in memory."""

    segment_max_episodes: int = setting(50, "roll to a new segment (bag) after this many episodes", min=1)
    segment_max_mb: float = setting(512.0, "roll to a new segment once it holds this many MiB", min=0.001)
    chunk_mb: float = setting(4.0, "MCAP chunk size in MiB (one episode is at least one chunk)", min=0.01)
    fsync: FsyncPolicy = setting(
        "episode",
        "when data reaches stable storage: 'episode' (every completed episode, before it is indexed), "
        "'segment' (when a segment closes), 'never' (leave it to the OS; survives kill -9, not power loss)",
        choices=("episode", "segment", "never"),
    )
    cache_size: int = setting(20_000, "decoded transitions kept in memory (FIFO of the newest)", min=0)
    cache_ratio: float = setting(
        0.0,
        "if > 0, the cache holds this fraction of all stored transitions instead of cache_size",
        min=0.0,
        max=1.0,
    )
    max_episode_steps: int = setting(100_000, "an episode longer than this is an error (a missing end)", min=1)


@dataclass(frozen=True)
class SamplerConfig:
    """Which transitions a batch draws from."""

    kind: SamplerKind = setting(
        "auto",
        "auto | uniform | recent | staleness | demo_ratio (RLPD) | intervention (HG-DAgger). auto: the "
        "algorithm's own in a learner (rlpd: demo_ratio at rlpd.demo_ratio; hg_dagger: intervention); otherwise "
        "(sac, a buffer on its own) half of each batch from demonstrations once the buffer holds any, uniform "
        "over all transitions while it holds none",
        choices=("auto", "uniform", "recent", "staleness", "demo_ratio", "intervention"),
    )
    demo_ratio: float = setting(
        0.5,
        "demo_ratio: fraction of each batch drawn from demonstrations",
        min=0.0,
        max=1.0,
        when=("kind", "demo_ratio"),
    )
    window: int = setting(
        100_000, "recent: sample only the newest this many transitions", min=1, when=("kind", "recent")
    )
    max_staleness: int = setting(
        -1,
        "staleness: ignore transitions more than this many policy versions old (-1: keep all)",
        min=-1,
        when=("kind", "staleness"),
    )
    staleness_temperature: float = setting(
        0.0,
        "staleness: weight exp(-staleness / T) per transition (0: uniform over the kept ones)",
        min=0.0,
        when=("kind", "staleness"),
    )
    include_demos: bool = setting(True, "intervention: also draw from demonstrations", when=("kind", "intervention"))
    balance_tasks: bool = setting(
        False,
        "split each batch among the tasks stored, a task's share growing with its recent failure rate (one policy "
        "for several tasks); within a task the kind's rule applies (demo_ratio, uniform or auto only)",
    )
    task_floor: float = setting(
        0.2,
        "balance_tasks: a task's share is (1 - its recent success rate) + task_floor, so a solved task keeps some "
        "rows and is not forgotten",
        min=0.0,
    )
    task_window: int = setting(
        20, "balance_tasks: a task's success rate is over its latest this many finished online episodes", min=1
    )
    seed: int = setting(0, "random seed of the sampler")

    def __post_init__(self) -> None:
        if self.balance_tasks and self.kind not in BALANCED_KINDS:
            raise ConfigError(
                f"balance_tasks: the {self.kind!r} sampler cannot be split among tasks (only demo_ratio, uniform or "
                "auto; an algorithm's auto may be another kind: hg_dagger's is intervention); "
                "set balance_tasks: false or another kind"
            )


@dataclass(frozen=True)
class RateLimiterConfig:
    """How fast the learner may sample compared to how fast data arrives (update-to-data ratio)."""

    samples_per_insert: float = setting(
        0.0, "target transitions sampled per transition inserted (0: no limit)", min=0.0
    )
    min_size: int = setting(256, "transitions the buffer must hold before the first batch", min=0)
    error_buffer: float = setting(
        1024.0, "how many sampled transitions the learner may run ahead of (or behind) the target", min=1.0
    )


@dataclass(frozen=True)
class FramesConfig:
    """How pixel batches are made: decoded off the learner's thread, in parallel, each frame once."""

    cache_mb: float = setting(
        2048.0,
        "memory ceiling of decoded frames kept (the newest, at the batches' resolution; also bounded by the "
        "frames of the transitions the transition cache holds); 0: no frame is kept, every batch decodes",
        min=0.0,
    )
    workers: int = setting(0, "threads decoding frames (OpenCV releases the GIL); 0: one per usable core", min=0)
    image_size: int | None = setting(
        None, "frames are resized to image_size x image_size as they decode (area interpolation); null: as stored"
    )
    device: Literal["auto", "cpu", "cuda"] = setting(
        "auto",
        "where JPEGs decode: cpu (OpenCV), cuda (nvJPEG via torchvision; an error without it), auto (cuda when there)",
        choices=("auto", "cpu", "cuda"),
    )
    prime: bool = setting(True, "decode the frames of each committed episode in the background, before sampling")

    def __post_init__(self) -> None:
        if self.image_size is not None and self.image_size < 1:
            raise ValueError(f"frames.image_size must be at least 1 pixel (or null), not {self.image_size}")


@dataclass(frozen=True)
class BufferConfig:
    """The persistent replay buffer: storage, sampling and rate limiting (nested settings are frozen)."""

    storage: StorageConfig = setting(StorageConfig(), "segments, durability, cache")
    sampler: SamplerConfig = setting(SamplerConfig(), "what a batch draws from")
    rate_limiter: RateLimiterConfig = setting(RateLimiterConfig(), "update-to-data ratio")
    batch_size: int = setting(256, "transitions per batch", min=1)
    chunk_horizon: int = setting(
        0,
        "action chunks for a chunk learner (a pi0-style VLA): each sampled step also carries the next H actions "
        "of its episode (masked, and the last action repeated, past its end; the human's steps marked); must be "
        "the model's chunk size. 0: off, batches as without chunks",
        min=0,
    )
    prefetch: int = setting(2, "batches prepared in the background (0: sample in the caller's thread)", min=0)
    decode_images: bool = setting(True, "batches carry decoded HxWx3 uint8 pixels (else the compressed bytes)")
    frames: FramesConfig = setting(FramesConfig(), "decoding of pixel batches: threads, device, decoded-frame cache")
