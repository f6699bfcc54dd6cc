"""Chunking core: FlatWeights <-> chunks, and the Assembler's handling of disorder and corruption."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from user.interfaces.codec import default_codec
from user.policies import FlatWeights, MLPPolicy, MLPPolicyConfig
from user.sync.chunking import (
    Assembler,
    Chunk,
    chunk_from_msg,
    chunk_to_msg,
    decode_payload,
    encode_payload,
    join_payload,
    split_weights,
)
from user.sync.errors import ChecksumError, ChunkError, PayloadError


def _weights(version: int = 3, seed: int = 0, dtype: torch.dtype | None = None) -> FlatWeights:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=5, action_dim=2, hidden=(16, 16), seed=seed))
    policy.version = version
    return policy.get_weights(dtype)


def test_round_trip_float32_is_exact_across_many_chunks() -> None:
    weights = _weights()
    chunks = split_weights(weights, "arm", chunk_size=100)
    assert len(chunks) > 5
    assert {c.count for c in chunks} == {len(chunks)}
    assert sum(len(c.data) for c in chunks) == chunks[0].total_bytes
    got = join_payload(chunks)
    assert got.version == 3 and got.spec == weights.spec and got.data.dtype == torch.float32
    assert torch.equal(got.data, weights.data)


def test_round_trip_bfloat16_cast_halves_the_payload_and_loads_into_a_float32_policy() -> None:
    full = _weights(dtype=torch.float32)
    half = _weights(dtype=torch.bfloat16)
    chunks = split_weights(half, "arm", chunk_size=256)
    assert chunks[0].dtype == "bfloat16"
    assert chunks[0].total_bytes < split_weights(full, "arm")[0].total_bytes * 0.6
    got = join_payload(chunks)
    assert got.data.dtype == torch.bfloat16 and torch.equal(got.data, half.data)
    target = MLPPolicy(MLPPolicyConfig(state_dim=5, action_dim=2, hidden=(16, 16), seed=9))
    target.load_weights(got)
    assert target.version == 3
    torch.testing.assert_close(target.get_weights().data, full.data, rtol=1e-2, atol=1e-2)


def test_chunk_survives_the_weightchunk_message_codec() -> None:
    codec = default_codec()
    chunk = split_weights(_weights(), "arm", chunk_size=64)[1]
    msg = codec.decode(codec.encode(chunk_to_msg(chunk, codec, 123), "user/msg/WeightChunk"), "user/msg/WeightChunk")
    assert chunk_from_msg(msg) == chunk


def test_out_of_order_and_duplicate_chunks_assemble_once() -> None:
    weights = _weights()
    chunks = split_weights(weights, "arm", chunk_size=50)
    shuffled = chunks + chunks[::2]
    random.Random(0).shuffle(shuffled)
    assembler = Assembler("arm")
    results = [r for r in (assembler.add(c) for c in shuffled) if r is not None]
    assert len(results) == 1
    assert torch.equal(results[0].data, weights.data)
    assert all(assembler.add(c) is None for c in chunks)  # a completed version is not yielded again


def test_crc_corruption_is_rejected_and_never_yielded() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    bad = bytearray(chunks[2].data)
    bad[5] ^= 0xFF
    chunks[2] = dataclasses.replace(chunks[2], data=bytes(bad))
    assembler = Assembler("arm")
    with pytest.raises(ChecksumError) as info:
        for chunk in chunks:
            assert assembler.add(chunk) is None
    assert (info.value.policy_id, info.value.version) == ("arm", 3)
    assert "arm" in str(info.value) and "version 3" in str(info.value)
    assert assembler.completed_version == -1 and assembler.pending_version is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"count": 99}, "count"),
        ({"index": 500}, "out of range"),
        ({"dtype": "float16"}, "dtype"),
        ({"data": b"x" * 10_000}, "exceed"),
    ],
)
def test_inconsistent_chunk_is_rejected_with_its_index(change: dict[str, object], reason: str) -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    assembler = Assembler("arm")
    assembler.add(chunks[0])
    with pytest.raises(ChunkError, match=reason) as info:
        assembler.add(dataclasses.replace(chunks[1], **change))  # type: ignore[arg-type]
    assert info.value.index == change.get("index", 1)
    assert info.value.version == 3


def test_truncated_version_is_rejected() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    chunks[-1] = dataclasses.replace(chunks[-1], data=chunks[-1].data[:-3])
    with pytest.raises(ChunkError, match="truncated"):
        join_payload(chunks)


def test_duplicate_index_with_other_bytes_is_rejected() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    assembler = Assembler("arm")
    assembler.add(chunks[0])
    with pytest.raises(ChunkError, match="duplicate"):
        assembler.add(dataclasses.replace(chunks[0], data=bytes(len(chunks[0].data))))


def test_newer_version_supersedes_an_incomplete_older_one() -> None:
    old = split_weights(_weights(version=4, seed=1), "arm", chunk_size=64)
    new = split_weights(_weights(version=5, seed=2), "arm", chunk_size=64)
    assembler = Assembler("arm")
    for chunk in old[:-1]:
        assert assembler.add(chunk) is None
    result = None
    for chunk in new[:3]:
        result = assembler.add(chunk)
    assert assembler.pending_version == 5 and assembler.dropped_versions == 1
    assert assembler.add(old[-1]) is None  # the older version's last chunk arrives too late
    for chunk in new[3:]:
        result = assembler.add(chunk) or result
    assert result is not None and result.version == 5
    assert torch.equal(result.data, _weights(version=5, seed=2).data)
    assert all(assembler.add(c) is None for c in old)  # older than the completed version: ignored


def test_payload_header_errors_are_typed() -> None:
    payload, name = encode_payload(_weights())
    with pytest.raises(PayloadError, match="dtype"):
        decode_payload(payload, "int7", 1)
    with pytest.raises(PayloadError, match="starts|start"):
        decode_payload(b"XXXX" + payload[4:], name, 1)
    with pytest.raises(PayloadError, match="tensor bytes"):
        decode_payload(payload[:-4], name, 1)


def test_chunk_of_another_policy_is_rejected() -> None:
    chunk = split_weights(_weights(), "gripper")[0]
    with pytest.raises(ChunkError, match="gripper"):
        Assembler("arm").add(chunk)


def test_single_chunk_default_size() -> None:
    chunks = split_weights(_weights(), "arm")
    assert len(chunks) == 1 and isinstance(chunks[0], Chunk)
    assert join_payload(chunks).version == 3
