"""Typed errors of weight synchronisation: a rejected chunk or version is never applied."""

from __future__ import annotations


class WeightSyncError(ValueError):
    """Base class: weights could not be published, received or applied."""


class ChunkError(WeightSyncError):
    """A chunk, or the version it belongs to, was rejected (inconsistent, truncated or corrupt)."""

    def __init__(self, policy_id: str, version: int, index: int, reason: str) -> None:
        super().__init__(f"weights of policy {policy_id!r} version {version} chunk {index}: {reason}")
        self.policy_id = policy_id
        self.version = version
        self.index = index
        self.reason = reason


class ChecksumError(ChunkError):
    """A completely received version does not match its CRC-32: it is dropped, not applied."""


class PayloadError(WeightSyncError):
    """A whole payload is well-formed at the chunk level but its header or tensor bytes do not parse."""
