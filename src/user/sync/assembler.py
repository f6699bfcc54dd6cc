"""`Assembler`: chunks -> FlatWeights, the receiving side of weight synchronisation (ROS-free).

An `Assembler` collects the parts of one version (`user.sync.chunking` cuts them) and yields `FlatWeights` only when
all arrived, sizes add up, the checksum matches, the payload parses (plain, or delta-coded against the last
version yielded), the layout is the expected one and every value is finite.
"""

from __future__ import annotations

import logging
import zlib
from typing import NoReturn

from user.interfaces.validate import InvalidMessageError, check_weights
from user.policies.base import FlatWeights, WeightSpec
from user.sync.chunking import DTYPES, Chunk, decode_payload
from user.sync.delta import MAGIC as DELTA_MAGIC
from user.sync.delta import DeltaDecoder
from user.sync.errors import ChecksumError, ChunkError, PayloadError

_log = logging.getLogger(__name__)


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
