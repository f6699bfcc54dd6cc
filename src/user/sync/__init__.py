"""Weight synchronisation: versioned, chunked actor-weight publication from learner to robot sites.

`chunking` (FlatWeights -> chunks) and `assembler` (chunks -> FlatWeights, checked) are the ROS-free core;
`WeightPublisher` and `WeightSubscriber` adapt it to a `Node`. The subscriber applies a version as it completes; the
rollout pins each robot's version itself (`user.acting.pinning`).
"""

from user.sync.assembler import Assembler
from user.sync.chunking import DEFAULT_CHUNK_SIZE, Chunk, split_weights
from user.sync.errors import ChecksumError, ChunkError, PayloadError, WeightSyncError
from user.sync.publisher import WeightPublisher
from user.sync.subscriber import WeightSubscriber

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "Assembler",
    "ChecksumError",
    "Chunk",
    "ChunkError",
    "PayloadError",
    "WeightPublisher",
    "WeightSubscriber",
    "WeightSyncError",
    "split_weights",
]
