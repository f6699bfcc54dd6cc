"""`SessionConfig`: what a learning session trains, where it keeps it and how it paces itself, declared once. The
`learner` node's settings extend it (`user.nodes.learner.LearnerParams`), so each of these is a learner parameter
of the same name (`run_dir`, `learning.sac.gamma`, `pacing.mode` ...).

`learner_buffer_config` is the buffer a session opens: the configured one with its batch size, rate limiter,
sampler and prefetch set from the algorithm and the pacing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from user.buffer.config import BufferConfig, RateLimiterConfig
from user.config.strict import setting
from user.distributed.ranks import RanksConfig
from user.learner.config import LearningConfig, PacingConfig
from user.learner.device import DEVICE_HELP
from user.learner.speed import SpeedConfig


@dataclass(frozen=True)
class SessionConfig:
    """What a learning session trains, where it keeps it and how it paces itself."""

    run_dir: str = setting("runs/learner", "run directory: buffer/, checkpoints/, progress.csv")
    resume: bool = setting(True, "continue from run_dir/checkpoints/latest.pt when it exists")
    learning: LearningConfig = setting(LearningConfig(), "policy and algorithm")
    pacing: PacingConfig = setting(PacingConfig(), "update-to-data ratio, mode, publication")
    buffer: BufferConfig = setting(
        BufferConfig(), "the persistent buffer (batch size and rate limiter are set from learning/pacing)"
    )
    checkpoint_period_s: float = setting(
        60.0, "checkpoint at most this often while training, s; 0 = only at exit", min=0.0
    )
    keep_checkpoints: int = setting(3, "numbered checkpoints kept beside latest.pt", min=1)
    device: str = setting("cpu", DEVICE_HELP)
    speed: SpeedConfig = setting(SpeedConfig(), "GPU speed-ups: prefetch, bf16 autocast, channels-last, compile")
    ranks: RanksConfig = setting(RanksConfig(), "learner processes on this and other machines, started by torchrun")
    sync_train_timeout_s: float = setting(600.0, "sync mode: longest training phase, s", min=1.0)
    curve_period_s: float = setting(
        30.0, "learning_curve.png redrawn this often (on a thread of its own), s; 0: only when the run ends", min=0.0
    )
    tensorboard: bool = setting(True, "write the progress rows as TensorBoard scalars too (run_dir/tensorboard)")


def learner_buffer_config(learning: LearningConfig, pacing: PacingConfig, buffer: BufferConfig) -> BufferConfig:
    """The buffer a learner opens: batch size from the algorithm, the rate limiter holding the update-to-data
    ratio (async) or off (sync: phases are sized explicitly), the algorithm's sampler, prefetch only in async
    mode (in sync mode every batch must see the newest episode)."""
    if pacing.mode == "async":  # samples per insert = rows per gradient step x gradient steps per transition
        spi = pacing.updates_per_step * learning.batch_size / learning.gradient_steps_per_update
    else:
        spi = 0.0
    limiter = RateLimiterConfig(
        samples_per_insert=spi,
        min_size=pacing.min_transitions,
        error_buffer=max(buffer.rate_limiter.error_buffer, float(learning.batch_size)),
    )
    return replace(
        buffer,
        rate_limiter=limiter,
        sampler=learning.sampler_for(buffer.sampler),
        batch_size=learning.batch_size,
        prefetch=buffer.prefetch if pacing.mode == "async" else 0,
    )
