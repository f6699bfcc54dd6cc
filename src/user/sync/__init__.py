"""Weight synchronisation: versioned, chunked actor-weight publication from learner to robot sites.

`chunking` is the ROS-free core (FlatWeights <-> chunks, `Assembler`); `WeightPublisher` and
`WeightSubscriber` adapt it to a `Node`. Weights are applied at an episode boundary by default.
"""

from user.sync.chunking import DEFAULT_CHUNK_SIZE, Assembler, Chunk, join_payload, split_weights
from user.sync.errors import ChecksumError, ChunkError, PayloadError, WeightSyncError
from user.sync.publisher import WeightPublisher
from user.sync.subscriber import ApplyMode, WeightSubscriber

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ApplyMode",
    "Assembler",
    "ChecksumError",
    "Chunk",
    "ChunkError",
    "PayloadError",
    "WeightPublisher",
    "WeightSubscriber",
    "WeightSyncError",
    "join_payload",
    "split_weights",
]
