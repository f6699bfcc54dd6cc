"""Compressed and delta-coded weight payloads for wide-area links (payload format "UWF2").

Each tensor is sent the smallest of three ways, decided per tensor and per version:

- `raw`: its little-endian bytes, as in "UWF1";
- `zlib`: those bytes byte-shuffled (every value's first bytes, then every value's second bytes, ...) and
  deflated: float bytes of one significance compress together;
- `delta`: the XOR of its bytes with the same tensor of the base version (the version sent before, which the
  subscriber assembled), shuffled and deflated: between two nearby versions most high bytes do not change.

Layout::

    b"UWF2" | uint32 LE header length | UTF-8 JSON header | the tensors' encoded bytes, in order

The header holds the WeightSpec, the element count, `base` (the version deltas refer to, -1 when there are
none: a keyframe), each tensor's `enc` and encoded length, and `crc_raw`, the CRC-32 of the decoded tensor
bytes: a delta decoded against the wrong base can never pass as weights. A subscriber without that base
raises `BaseMissingError` (the version is dropped like a damaged one) and asks for a resend, which the
publisher answers with a keyframe. Every `keyframe_every`-th version is a keyframe anyway.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from user.policies.base import FlatWeights, WeightSpec
from user.sync.errors import PayloadError

MAGIC = b"UWF2"
_PREFIX = struct.Struct("<4sI")  # magic, header length
LEVEL = 6  # zlib level: the learner compresses once per version, every robot site saves the bytes


def read_header(payload: bytes, magic: bytes, version: int) -> tuple[dict[str, Any], WeightSpec, int]:
    """(the JSON header, its WeightSpec, where the tensor bytes start) of a payload starting with `magic`."""
    if len(payload) < _PREFIX.size:
        raise PayloadError(f"version {version}: payload of {len(payload)} bytes is shorter than its prefix")
    found, head_len = _PREFIX.unpack_from(payload)
    if found != magic:
        raise PayloadError(f"version {version}: payload does not start with {magic!r}")
    start = _PREFIX.size + head_len
    try:
        meta = json.loads(payload[_PREFIX.size : start].decode())
        shapes = tuple(tuple(int(d) for d in s) for s in meta["shapes"])
        return meta, WeightSpec(tuple(str(n) for n in meta["names"]), shapes), start
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PayloadError(f"version {version}: bad payload header: {exc}") from exc


class BaseMissingError(PayloadError):
    """A delta-coded version refers to a base version this subscriber does not hold."""


def _raw(weights: FlatWeights) -> bytes:
    return weights.data.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _split(raw: bytes, spec: WeightSpec, itemsize: int) -> list[bytes]:
    """The raw bytes of each tensor of `spec`."""
    out, start = [], 0
    for shape in spec.shapes:
        size = int(np.prod(shape, dtype=np.int64)) * itemsize
        out.append(raw[start : start + size])
        start += size
    return out


def _shuffle(data: bytes, itemsize: int) -> bytes:
    return bytes(np.frombuffer(data, dtype=np.uint8).reshape(-1, itemsize).T.tobytes())


def _unshuffle(data: bytes, itemsize: int) -> bytes:
    return bytes(np.frombuffer(data, dtype=np.uint8).reshape(itemsize, -1).T.tobytes())


def _xor(a: bytes, b: bytes) -> bytes:
    return np.bitwise_xor(np.frombuffer(a, dtype=np.uint8), np.frombuffer(b, dtype=np.uint8)).tobytes()


@dataclass
class EncodeStats:
    """How one version was sent."""

    raw_bytes: int  # the tensors' bytes uncompressed
    sent_bytes: int  # the tensors' bytes as encoded
    encodings: dict[str, int]  # tensors per encoding


class DeltaEncoder:
    """The publisher's side: remembers the last version it sent, as the base of the next one's deltas."""

    def __init__(self, keyframe_every: int = 20) -> None:
        if keyframe_every < 1:
            raise ValueError(f"keyframe_every must be at least 1, got {keyframe_every}")
        self.keyframe_every = keyframe_every
        self._base: tuple[int, WeightSpec, list[bytes]] | None = None
        self._since_keyframe = 0
        self.last_stats: EncodeStats | None = None

    def encode(self, weights: FlatWeights, keyframe: bool = False) -> bytes:
        """The UWF2 payload of `weights`; it becomes the base of the next call (a keyframe when asked, when there
        is no base of the same layout, or every `keyframe_every` versions)."""
        itemsize = weights.data.element_size()
        tensors = _split(_raw(weights), weights.spec, itemsize)
        base = self._base
        delta = (
            not keyframe
            and base is not None
            and base[1] == weights.spec
            and self._since_keyframe + 1 < self.keyframe_every
        )
        entries, blobs = [], []
        for k, raw in enumerate(tensors):
            options = {"raw": raw, "zlib": zlib.compress(_shuffle(raw, itemsize), LEVEL)}
            if delta and base is not None:
                options["delta"] = zlib.compress(_shuffle(_xor(raw, base[2][k]), itemsize), LEVEL)
            enc = min(options, key=lambda name: len(options[name]))
            entries.append({"enc": enc, "len": len(options[enc])})
            blobs.append(options[enc])
        uses_base = any(e["enc"] == "delta" for e in entries)
        meta = {
            "names": list(weights.spec.names),
            "shapes": [list(s) for s in weights.spec.shapes],
            "numel": weights.spec.numel,
            "base": base[0] if uses_base and base is not None else -1,
            "crc_raw": zlib.crc32(b"".join(tensors)),
            "tensors": entries,
        }
        self._since_keyframe = self._since_keyframe + 1 if uses_base else 0
        self._base = (weights.version, weights.spec, tensors)
        counts: dict[str, int] = {}
        for e in entries:
            counts[str(e["enc"])] = counts.get(str(e["enc"]), 0) + 1
        self.last_stats = EncodeStats(sum(map(len, tensors)), sum(map(len, blobs)), counts)
        head = json.dumps(meta, separators=(",", ":")).encode()
        return _PREFIX.pack(MAGIC, len(head)) + head + b"".join(blobs)


class DeltaDecoder:
    """The subscriber's side: the tensors of the last version assembled, the base of the next deltas."""

    def __init__(self) -> None:
        self.base_version = -1
        self._base: list[bytes] = []

    def remember(self, weights: FlatWeights) -> None:
        """`weights` (verified) are the base of later deltas."""
        self.base_version = weights.version
        self._base = _split(_raw(weights), weights.spec, weights.data.element_size())

    def decode(self, payload: bytes, dtype: torch.dtype, version: int) -> FlatWeights:
        """FlatWeights of a UWF2 payload; `PayloadError` when it does not parse, `BaseMissingError` without its base."""
        meta, spec, start = read_header(payload, MAGIC, version)
        try:
            entries = [(str(e["enc"]), int(e["len"])) for e in meta["tensors"]]
            base, crc_raw, numel = int(meta["base"]), int(meta["crc_raw"]), int(meta["numel"])
        except (ValueError, KeyError, TypeError) as exc:
            raise PayloadError(f"version {version}: bad payload header: {exc}") from exc
        if numel != spec.numel or len(entries) != len(spec.shapes):
            raise PayloadError(f"version {version}: header lists {len(entries)} tensors for {len(spec.shapes)} shapes")
        if base >= 0 and (base != self.base_version or len(self._base) != len(entries)):
            raise BaseMissingError(
                f"version {version}: a delta on version {base}, but version {self.base_version} is held"
            )
        itemsize = torch.empty(0, dtype=dtype).element_size()
        tensors, offset = [], start
        for k, (enc, length) in enumerate(entries):
            blob = payload[offset : offset + length]
            offset += length
            tensors.append(self._tensor(enc, blob, k, itemsize, version))
        raw = b"".join(tensors)
        if offset != len(payload) or len(raw) != numel * itemsize or zlib.crc32(raw) != crc_raw:
            raise PayloadError(f"version {version}: decoded tensors do not match the header (length or CRC-32)")
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype) if raw else torch.empty(0, dtype=dtype)
        return FlatWeights(data, spec, version)

    def _tensor(self, enc: str, blob: bytes, k: int, itemsize: int, version: int) -> bytes:
        try:
            if enc == "raw":
                return blob
            if enc == "zlib":
                return _unshuffle(zlib.decompress(blob), itemsize)
            if enc == "delta":
                return _xor(_unshuffle(zlib.decompress(blob), itemsize), self._base[k])
        except (zlib.error, ValueError) as exc:
            raise PayloadError(f"version {version}: tensor {k} ({enc}) does not decode: {exc}") from exc
        raise PayloadError(f"version {version}: tensor {k} has unknown encoding {enc!r}")
