"""The persistent, cache-aware replay buffer (DESIGN.md section 3).

rosbag2 bags with MCAP storage on disk (segment by segment, each one a valid Humble bag), a SQLite index
beside them, a FIFO cache of decoded transitions in front; Storage / Sampler / Writer split like torchrl's
replay buffers, a rate limiter for the update-to-data ratio, background prefetch, and crash recovery.
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
from user.buffer.index import TransitionQuery
from user.buffer.info import BufferInfo
from user.buffer.rate_limiter import RateLimiter
from user.buffer.replay import ReplayBuffer
from user.buffer.samplers import (
    DemoRatioSampler,
    InterventionSampler,
    RecentSampler,
    Sampler,
    StalenessSampler,
    UniformSampler,
    make_sampler,
)
from user.buffer.verify import VerifyReport

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
    "TransitionBatch",
    "TransitionQuery",
    "TruncatedSegmentError",
    "UniformSampler",
    "VerifyReport",
    "collate",
    "make_sampler",
]
