"""The persistent, cache-aware replay buffer (DESIGN.md section 3).

rosbag2 bags with MCAP storage on disk (segment by segment, each one a valid Humble bag), a SQLite index
beside them, a FIFO cache of decoded transitions in front; Storage / Sampler / Writer split like torchrl's
replay buffers, a rate limiter for the update-to-data ratio, background prefetch, and crash recovery.

`ReplayBuffer` (replay.py) is the face; beside it the core: storage.py (reads by transition number), writer.py
and commit.py (episodes in), index.py over index_file.py and rows.py, columns.py, cache.py, samplers.py (and
task_sampler.py: batches balanced across tasks), rate_limiter.py. The wings: disk/ (the files: segments, frames on
camera topics, the directory), frames/ (pixel batches, prefetch), repair/ (recovery, reindex, verify, quarantine),
bags/ (bags imported, datasets exported).
"""

from user.buffer.batch import BatchError, TransitionBatch, collate
from user.buffer.config import BufferConfig, RateLimiterConfig, SamplerConfig, StorageConfig
from user.buffer.errors import (
    BagReadError,
    BufferError,
    BufferIndexError,
    BufferLockedError,
    CorruptRecordError,
    CorruptRowError,
    MappingError,
    NotReadyError,
    ReadOnlyBufferError,
    SampleTimeoutError,
    SegmentError,
    TruncatedSegmentError,
)
from user.buffer.info import BufferInfo
from user.buffer.rate_limiter import RateLimiter
from user.buffer.repair.verify import VerifyReport
from user.buffer.replay import ReplayBuffer
from user.buffer.rows import TransitionQuery
from user.buffer.samplers import (
    DemoRatioSampler,
    InterventionSampler,
    RecentSampler,
    Sampler,
    StalenessSampler,
    UniformSampler,
    make_sampler,
)
from user.buffer.task_sampler import TaskBalancedSampler

__all__ = [
    "BagReadError",
    "BatchError",
    "BufferConfig",
    "BufferError",
    "BufferIndexError",
    "BufferInfo",
    "BufferLockedError",
    "CorruptRecordError",
    "CorruptRowError",
    "DemoRatioSampler",
    "InterventionSampler",
    "MappingError",
    "NotReadyError",
    "RateLimiter",
    "RateLimiterConfig",
    "ReadOnlyBufferError",
    "RecentSampler",
    "ReplayBuffer",
    "SampleTimeoutError",
    "Sampler",
    "SamplerConfig",
    "SegmentError",
    "StalenessSampler",
    "StorageConfig",
    "TaskBalancedSampler",
    "TransitionBatch",
    "TransitionQuery",
    "TruncatedSegmentError",
    "UniformSampler",
    "VerifyReport",
    "collate",
    "make_sampler",
]
