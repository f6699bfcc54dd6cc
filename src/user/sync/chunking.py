"""The wire format of weight synchronisation (ROS-free): FlatWeights <-> payload bytes, payload -> chunks, chunks <->
user/msg/WeightChunk. `user.sync.assembler` collects received chunks into checked versions.

Payload of one version (what the CRC-32 and `total_bytes` cover)::

    b"UWF1" | uint32 LE header length | UTF-8 JSON header | raw tensor bytes (little-endian)

The JSON header holds the `WeightSpec` (names, shapes) and the element count, so a receiver rebuilds
`FlatWeights` from the payload alone; the tensor dtype travels in every chunk's `dtype` field. The
payload is cut into parts of at most `chunk_size` bytes; part `index` of `count` carries bytes
`[index * chunk_size, ...)`; the chunk's header.frame_id names its publisher (the learner id). Weights sent
delta-coded and compressed have a payload of their own ("UWF2", `user.sync.delta`).
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from user.interfaces.codec import Codec
from user.interfaces.stamps import header
from user.policies.base import FlatWeights, WeightSpec
from user.sync.delta import DeltaEncoder, read_header
from user.sync.errors import PayloadError

DEFAULT_CHUNK_SIZE = 1 << 20  # 1 MiB per WeightChunk message
MSG_TYPE = "user/msg/WeightChunk"
_MAGIC = b"UWF1"
_PREFIX = struct.Struct("<4sI")  # magic, header length

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """Wire name of a torch dtype ("float32", "bfloat16", ...); `PayloadError` for unsupported ones."""
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise PayloadError(f"weights of dtype {dtype} cannot be sent; use one of {sorted(DTYPES)}") from None


@dataclass(frozen=True)
class Chunk:
    """One part of a version's payload: the fields of user/msg/WeightChunk without the header."""

    policy_id: str
    version: int
    index: int
    count: int
    total_bytes: int
    crc32: int
    dtype: str
    data: bytes = field(repr=False)
    publisher: str = ""  # who sent it (the learner id, carried as header.frame_id); empty: not named


# ---- payload ------------------------------------------------------------------------------------


def encode_payload(weights: FlatWeights) -> tuple[bytes, str]:
    """(payload bytes, dtype name) of `weights`."""
    name = dtype_name(weights.data.dtype)
    meta = {
        "names": list(weights.spec.names),
        "shapes": [list(s) for s in weights.spec.shapes],
        "numel": weights.spec.numel,
    }
    head = json.dumps(meta, separators=(",", ":")).encode()
    tensor = weights.data.detach().to("cpu").contiguous().reshape(-1)
    if tensor.numel() != weights.spec.numel:
        raise PayloadError(f"flat weights hold {tensor.numel()} values, their spec says {weights.spec.numel}")
    raw = tensor.view(torch.uint8).numpy().tobytes()
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
        raise PayloadError("weight payloads are little-endian; this host is big-endian")
    return _PREFIX.pack(_MAGIC, len(head)) + head + raw, name


def payload_size(spec: WeightSpec, dtype: torch.dtype) -> int:
    """Bytes of the payload for weights of `spec` sent as `dtype` (known before any weights exist)."""
    meta = {"names": list(spec.names), "shapes": [list(s) for s in spec.shapes], "numel": spec.numel}
    head = json.dumps(meta, separators=(",", ":")).encode()
    return _PREFIX.size + len(head) + spec.numel * torch.empty(0, dtype=dtype).element_size()


def decode_payload(payload: bytes, dtype: str, version: int) -> FlatWeights:
    """FlatWeights from a whole payload; `PayloadError` when it does not parse."""
    if dtype not in DTYPES:
        raise PayloadError(f"version {version}: unknown weight dtype {dtype!r}")
    meta, spec, start = read_header(payload, _MAGIC, version)
    try:
        numel = int(meta["numel"])
    except (ValueError, KeyError, TypeError) as exc:
        raise PayloadError(f"version {version}: bad payload header: {exc}") from exc
    torch_dtype = DTYPES[dtype]
    itemsize = torch.empty(0, dtype=torch_dtype).element_size()
    raw = payload[start:]
    if numel != spec.numel or len(raw) != numel * itemsize:
        raise PayloadError(
            f"version {version}: {len(raw)} tensor bytes for {spec.numel} values of {dtype} (header says {numel})"
        )
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(torch_dtype) if raw else torch.empty(0)
    return FlatWeights(data.to(torch_dtype), spec, version)


# ---- chunks -------------------------------------------------------------------------------------


def chunk_count(size: int, chunk_size: int) -> int:
    """How many chunks a payload of `size` bytes needs (at least one)."""
    return max(1, -(-size // chunk_size))


def split_weights(
    weights: FlatWeights,
    policy_id: str,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    publisher: str = "",
    *,
    encoder: DeltaEncoder | None = None,
    keyframe: bool = False,
) -> list[Chunk]:
    """All chunks of one version, in order, naming `publisher`; compressed and delta-coded with `encoder`
    ("UWF2", `user.sync.delta`; `keyframe`: no delta), else plain ("UWF1")."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1 byte, got {chunk_size}")
    if weights.version < 0:
        raise ValueError(f"weight versions are non-negative, got {weights.version}")
    if encoder is not None:
        payload, name = encoder.encode(weights, keyframe), dtype_name(weights.data.dtype)
    else:
        payload, name = encode_payload(weights)
    crc = zlib.crc32(payload)
    count = chunk_count(len(payload), chunk_size)
    size = len(payload)
    parts = [payload[i * chunk_size : (i + 1) * chunk_size] for i in range(count)]
    return [
        Chunk(policy_id, weights.version, i, count, size, crc, name, part, publisher) for i, part in enumerate(parts)
    ]


def chunk_to_msg(chunk: Chunk, codec: Codec, stamp_ns: int) -> Any:
    """user/msg/WeightChunk for `chunk`."""
    return codec.msg_class(MSG_TYPE)(
        header=header(stamp_ns, chunk.publisher, codec),
        policy_id=chunk.policy_id,
        version=chunk.version,
        index=chunk.index,
        count=chunk.count,
        total_bytes=chunk.total_bytes,
        crc32=chunk.crc32,
        dtype=chunk.dtype,
        data=np.frombuffer(chunk.data, dtype=np.uint8),
    )


def chunk_from_msg(msg: Any) -> Chunk:
    """`Chunk` of a decoded user/msg/WeightChunk."""
    return Chunk(
        str(msg.policy_id),
        int(msg.version),
        int(msg.index),
        int(msg.count),
        int(msg.total_bytes),
        int(msg.crc32),
        str(msg.dtype),
        np.asarray(msg.data, dtype=np.uint8).tobytes(),
        str(msg.header.frame_id),
    )
