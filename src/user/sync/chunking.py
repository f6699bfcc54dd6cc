"""FlatWeights <-> chunks: the ROS-free core of weight synchronisation.

Payload of one version (what the CRC-32 and `total_bytes` cover)::

    b"UWF1" | uint32 LE header length | UTF-8 JSON header | raw tensor bytes (little-endian)

The JSON header holds the `WeightSpec` (names, shapes) and the element count, so a receiver rebuilds
`FlatWeights` from the payload alone; the tensor dtype travels in every chunk's `dtype` field. The
payload is cut into parts of at most `chunk_size` bytes; part `index` of `count` carries bytes
`[index * chunk_size, ...)`; the chunk's header.frame_id names its publisher (the learner id). An
`Assembler` collects the parts of one version and yields `FlatWeights` only when all arrived, sizes add up,
the checksum matches, the layout is the expected one and every value is finite.
"""

from __future__ import annotations

import json
import logging
import struct
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import torch

from user.interfaces.codec import Codec
from user.interfaces.stamps import header
from user.interfaces.validate import InvalidMessageError, check_weights
from user.policies.base import FlatWeights, WeightSpec
from user.sync.delta import MAGIC as DELTA_MAGIC
from user.sync.delta import DeltaDecoder, DeltaEncoder, read_header
from user.sync.errors import ChecksumError, ChunkError, PayloadError

_log = logging.getLogger(__name__)

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


def join_payload(chunks: list[Chunk]) -> FlatWeights:
    """FlatWeights from all chunks of one version (any order); raises like `Assembler.add`."""
    if not chunks:
        raise PayloadError("no chunks to join")
    assembler = Assembler(chunks[0].policy_id)
    result: FlatWeights | None = None
    for chunk in chunks:
        result = assembler.add(chunk) or result
    if result is None:
        raise ChunkError(chunks[0].policy_id, chunks[0].version, len(chunks), "chunks are missing")
    return result


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


# ---- assembly -----------------------------------------------------------------------------------


class _Pending:
    """The parts of one version received so far."""

    def __init__(self, first: Chunk) -> None:
        self.version = first.version
        self.count = first.count
        self.total_bytes = first.total_bytes
        self.crc32 = first.crc32
        self.dtype = first.dtype
        self.publisher = first.publisher
        self.parts: dict[int, bytes] = {}
        self.received_bytes = 0

    def mismatch(self, chunk: Chunk) -> str | None:
        for name in ("count", "total_bytes", "crc32", "dtype", "publisher"):
            if getattr(chunk, name) != getattr(self, name):
                return f"{name} {getattr(chunk, name)!r} differs from {getattr(self, name)!r} of earlier chunks"
        return None


class Assembler:
    """Collects the chunks of one policy's versions and yields each complete, verified version once.

    A version is yielded only whole, with a matching checksum, parsing, of the `spec` layout (when given) and
    with every value finite; `completed_version`, below which chunks are ignored, moves only to such a version.
    A version that fails any check is dropped, raising `ChunkError`/`ChecksumError`/`PayloadError`, and blocks
    nothing: a later real version still gets through. With `publisher` set, only chunks naming that publisher
    (the learner id in header.frame_id) are taken; a version's chunks must all name the same one.

    Duplicates and out-of-order arrival are tolerated. Two versions assemble at once: the newest seen (a newer
    one drops it unfinished, as a late joiner's first chunks may be an older version's tail) and the newest
    below it, so that a stalled or forged version with a higher number never holds real ones back. Not
    thread-safe: one caller.
    """

    def __init__(self, policy_id: str, spec: WeightSpec | None = None, publisher: str = "") -> None:
        self.policy_id = policy_id
        self.spec = spec
        self.publisher = publisher
        self.completed_version = -1  # newest version yielded; older chunks are ignored
        self.decoder = DeltaDecoder()  # the base of delta-coded versions: the last one yielded
        self.dropped_versions = 0  # unfinished versions superseded by a newer one
        self._slots: list[_Pending] = []  # at most two, highest version first

    @property
    def pending_version(self) -> int | None:
        """The highest version being assembled, if any."""
        return self._slots[0].version if self._slots else None

    def add(self, chunk: Chunk) -> FlatWeights | None:
        """Take one chunk; returns the version's FlatWeights when this chunk completed it."""
        self._check_alone(chunk)
        if chunk.version <= self.completed_version:
            return None
        pending = self._slot_for(chunk)
        return None if pending is None else self._store(pending, chunk)

    def rewind(self, version: int) -> None:
        """Versions above `version` count as not received (e.g. one the policy could not take): a resend of
        them is assembled again."""
        self.completed_version = min(self.completed_version, version)

    def _slot_for(self, chunk: Chunk) -> _Pending | None:
        """The pending version `chunk` belongs to, started when it is new and may assemble; None: too old."""
        for i, pending in enumerate(self._slots):
            if chunk.version == pending.version:
                return pending
            if chunk.version > pending.version:
                self._drop(pending, chunk.version)
                self._slots[i] = _Pending(chunk)
                return self._slots[i]
        if len(self._slots) < 2:
            self._slots.append(_Pending(chunk))
            return self._slots[-1]
        return None  # a late chunk of a version older than both being assembled

    def _drop(self, pending: _Pending, newer: int) -> None:
        _log.warning(
            "policy %r: version %d superseded by %d with %d/%d chunks received; dropped",
            self.policy_id,
            pending.version,
            newer,
            len(pending.parts),
            pending.count,
        )
        self.dropped_versions += 1

    def _check_alone(self, chunk: Chunk) -> None:
        """What one chunk must satisfy by itself."""
        if chunk.policy_id != self.policy_id:
            self._reject(chunk, f"belongs to policy {chunk.policy_id!r}")
        if self.publisher and chunk.publisher != self.publisher:
            self._reject(chunk, f"published by {chunk.publisher[:40]!r}, not by {self.publisher!r}")
        if chunk.count < 1 or not 0 <= chunk.index < chunk.count:
            self._reject(chunk, f"index {chunk.index} out of range for count {chunk.count}")
        if len(chunk.data) > chunk.total_bytes:
            self._reject(chunk, f"{len(chunk.data)} data bytes exceed the version's {chunk.total_bytes}")
        if chunk.count > max(1, chunk.total_bytes):
            self._reject(chunk, f"count {chunk.count} exceeds the version's {chunk.total_bytes} bytes")

    def _store(self, pending: _Pending, chunk: Chunk) -> FlatWeights | None:
        problem = pending.mismatch(chunk)
        if problem is not None:
            self._reject(chunk, problem)
        known = pending.parts.get(chunk.index)
        if known is not None:
            if known != chunk.data:
                self._reject(chunk, "a duplicate with different bytes arrived")
            return None
        if pending.received_bytes + len(chunk.data) > pending.total_bytes:
            self._reject(chunk, f"parts add up to more than the version's {pending.total_bytes} bytes")
        pending.parts[chunk.index] = chunk.data
        pending.received_bytes += len(chunk.data)
        if len(pending.parts) < pending.count:
            return None
        self._slots.remove(pending)
        weights = self._finish(pending)
        self.completed_version = weights.version
        for older in [p for p in self._slots if p.version < weights.version]:
            self._slots.remove(older)
            self._drop(older, weights.version)
        return weights

    def _finish(self, pending: _Pending) -> FlatWeights:
        """The version's weights, checked whole; raises (and the version is gone) when they are not usable."""
        payload = b"".join(pending.parts[i] for i in range(pending.count))
        last = pending.count - 1
        if len(payload) != pending.total_bytes:
            raise ChunkError(
                self.policy_id, pending.version, last, f"truncated: {len(payload)} of {pending.total_bytes} bytes"
            )
        crc = zlib.crc32(payload)
        if crc != pending.crc32:
            raise ChecksumError(
                self.policy_id, pending.version, last, f"CRC-32 {crc:#010x} does not match {pending.crc32:#010x}"
            )
        if payload.startswith(DELTA_MAGIC):
            if pending.dtype not in DTYPES:
                raise PayloadError(f"version {pending.version}: unknown weight dtype {pending.dtype!r}")
            weights = self.decoder.decode(payload, DTYPES[pending.dtype], pending.version)
        else:
            weights = decode_payload(payload, pending.dtype, pending.version)
        expected = None if self.spec is None else (self.spec.names, self.spec.shapes)
        try:
            check_weights(weights.data, weights.spec.names, weights.spec.shapes, expected=expected)
        except InvalidMessageError as exc:
            raise PayloadError(f"weights of policy {self.policy_id!r} version {pending.version}: {exc}") from exc
        self.decoder.remember(weights)
        return weights

    def _reject(self, chunk: Chunk, reason: str) -> NoReturn:
        raise ChunkError(self.policy_id, chunk.version, chunk.index, reason)
