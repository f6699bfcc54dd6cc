"""Chunking core: FlatWeights <-> chunks (`user.sync.chunking`), and the Assembler's handling of disorder and
corruption (`user.sync.assembler`)."""

from __future__ import annotations

import dataclasses
import random
import sys

import pytest
import torch

from user.interfaces.codec import default_codec
from user.policies import FlatWeights, MLPPolicy, MLPPolicyConfig
from user.policies.base import WeightSpec
from user.sync.assembler import Assembler
from user.sync.chunking import (
    Chunk,
    chunk_from_msg,
    chunk_to_msg,
    decode_payload,
    encode_payload,
    payload_size,
    split_weights,
)
from user.sync.errors import ChecksumError, ChunkError, PayloadError


def _weights(version: int = 3, seed: int = 0, dtype: torch.dtype | None = None) -> FlatWeights:
    policy = MLPPolicy(MLPPolicyConfig(state_dim=5, action_dim=2, hidden=(16, 16), seed=seed))
    policy.version = version
    return policy.get_weights(dtype)


def _join(chunks: list[Chunk]) -> FlatWeights:
    """The one version `chunks` make, put together by an `Assembler` as a robot site receives them."""
    assembler = Assembler(chunks[0].policy_id)
    made = [w for w in (assembler.add(c) for c in chunks) if w is not None]
    assert len(made) == 1, f"{len(made)} versions from {len(chunks)} chunks"
    return made[0]


def test_round_trip_float32_is_exact_across_many_chunks() -> None:
    weights = _weights()
    chunks = split_weights(weights, "arm", chunk_size=100)
    assert len(chunks) > 5
    assert {c.count for c in chunks} == {len(chunks)}
    assert sum(len(c.data) for c in chunks) == chunks[0].total_bytes
    got = _join(chunks)
    assert got.version == 3 and got.spec == weights.spec and got.data.dtype == torch.float32
    assert torch.equal(got.data, weights.data)


def test_round_trip_bfloat16_cast_halves_the_payload_and_loads_into_a_float32_policy() -> None:
    full = _weights(dtype=torch.float32)
    half = _weights(dtype=torch.bfloat16)
    chunks = split_weights(half, "arm", chunk_size=256)
    assert chunks[0].dtype == "bfloat16"
    assert chunks[0].total_bytes < split_weights(full, "arm")[0].total_bytes * 0.6
    got = _join(chunks)
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
    assert (info.value.policy_id, info.value.version, info.value.index) == ("arm", 3, len(chunks) - 1)
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
    assert info.value.version == 3 and info.value.policy_id == "arm"


def test_truncated_version_is_rejected() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    total = chunks[0].total_bytes
    chunks[-1] = dataclasses.replace(chunks[-1], data=chunks[-1].data[:-3])
    with pytest.raises(ChunkError) as info:
        _join(chunks)
    assert (info.value.policy_id, info.value.version, info.value.index) == ("arm", 3, len(chunks) - 1)
    assert info.value.reason == f"truncated: {total - 3} of {total} bytes"


def test_duplicate_index_with_other_bytes_is_rejected() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    assembler = Assembler("arm")
    assembler.add(chunks[0])
    with pytest.raises(ChunkError) as info:
        assembler.add(dataclasses.replace(chunks[0], data=bytes(len(chunks[0].data))))
    assert info.value.reason == "a duplicate with different bytes arrived" and info.value.index == 0


def test_newer_version_supersedes_an_incomplete_older_one(caplog: pytest.LogCaptureFixture) -> None:
    old = split_weights(_weights(version=4, seed=1), "arm", chunk_size=64)
    new = split_weights(_weights(version=5, seed=2), "arm", chunk_size=64)
    assembler = Assembler("arm")
    for chunk in old[:-1]:
        assert assembler.add(chunk) is None
    result = None
    for chunk in new[:3]:
        result = assembler.add(chunk)
    assert assembler.pending_version == 5 and assembler.dropped_versions == 1
    dropped = f"policy 'arm': version 4 superseded by 5 with {len(old) - 1}/{len(old)} chunks received; dropped"
    assert dropped in caplog.messages
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
    assert _join(chunks).version == 3


# ---- boundaries: chunk sizes, incomplete sets, versions, short payloads ------------------------------------


def test_round_trip_at_chunk_size_one() -> None:
    weights = _weights()
    chunks = split_weights(weights, "arm", chunk_size=1)
    size = chunks[0].total_bytes
    assert len(chunks) == size and all(len(c.data) == 1 for c in chunks)
    assert [c.index for c in chunks] == list(range(size))
    assert torch.equal(_join(chunks).data, weights.data)


@pytest.mark.parametrize(("delta", "count"), [(-1, 2), (0, 1), (1, 1)])
def test_round_trip_at_chunk_sizes_around_the_payload_length(delta: int, count: int) -> None:
    weights = _weights()
    size = len(encode_payload(weights)[0])
    chunks = split_weights(weights, "arm", chunk_size=size + delta)
    assert len(chunks) == count and {c.count for c in chunks} == {count}
    assert [len(c.data) for c in chunks] == ([size - 1, 1] if count == 2 else [size])
    assert torch.equal(_join(chunks).data, weights.data)


@pytest.mark.parametrize("chunk_size", [0, -5])
def test_a_chunk_size_below_one_byte_is_refused(chunk_size: int) -> None:
    with pytest.raises(ValueError, match=f"chunk_size must be at least 1 byte, got {chunk_size}"):
        split_weights(_weights(), "arm", chunk_size=chunk_size)


def test_version_minus_one_is_refused_and_version_zero_is_sent() -> None:
    with pytest.raises(ValueError, match="weight versions are non-negative, got -1"):
        split_weights(_weights(version=-1), "arm")
    assert _join(split_weights(_weights(version=0), "arm")).version == 0


def test_an_incomplete_chunk_set_makes_no_version() -> None:
    chunks = split_weights(_weights(), "arm", chunk_size=64)
    for given in (chunks[:-1], chunks[:1]):
        assembler = Assembler("arm")
        assert all(assembler.add(c) is None for c in given)
        assert assembler.pending_version == 3 and assembler.completed_version == -1


def test_chunks_in_any_order_join_but_relabelled_parts_fail_the_checksum() -> None:
    weights = _weights()
    chunks = split_weights(weights, "arm", chunk_size=64)
    assert torch.equal(_join(chunks[::-1]).data, weights.data)
    swapped = [dataclasses.replace(chunks[0], index=1), dataclasses.replace(chunks[1], index=0), *chunks[2:]]
    with pytest.raises(ChecksumError, match="CRC-32 0x[0-9a-f]{8} does not match 0x[0-9a-f]{8}"):
        _join(swapped)


def test_a_payload_shorter_than_its_prefix_is_refused() -> None:
    payload, name = encode_payload(_weights())
    for cut in (0, 4, 7):
        with pytest.raises(PayloadError, match=f"version 5: payload of {cut} bytes is shorter than its prefix"):
            decode_payload(payload[:cut], name, 5)


def test_a_payload_cut_inside_its_header_is_refused() -> None:
    payload, name = encode_payload(_weights())
    with pytest.raises(PayloadError, match="version 5: bad payload header"):
        decode_payload(payload[:20], name, 5)


def test_a_header_length_of_zero_is_a_bad_header_not_a_short_payload() -> None:
    with pytest.raises(PayloadError, match="^version 5: bad payload header: "):
        decode_payload(b"UWF1\x00\x00\x00\x00", "float32", 5)  # exactly the prefix, no header


def test_every_version_after_another_drops_the_unfinished_one_and_counts_it() -> None:
    assembler = Assembler("arm")
    for version in (1, 2, 3):
        assembler.add(split_weights(_weights(version=version), "arm", chunk_size=64)[0])
    assert assembler.dropped_versions == 2 and assembler.pending_version == 3


@pytest.mark.parametrize("index", [-1, 3])
def test_an_index_outside_zero_to_count_is_rejected(index: int) -> None:
    chunk = dataclasses.replace(split_weights(_weights(), "arm", chunk_size=64)[0], count=3, index=index)
    with pytest.raises(ChunkError, match=f"index {index} out of range for count 3"):
        Assembler("arm").add(chunk)


@pytest.mark.parametrize(("count", "total_bytes"), [(2, 1), (11, 10)])
def test_a_version_cannot_have_more_chunks_than_bytes(count: int, total_bytes: int) -> None:
    chunk = Chunk("arm", 1, 0, count, total_bytes, 0, "float32", b"x")
    with pytest.raises(ChunkError) as info:
        Assembler("arm").add(chunk)
    assert info.value.reason == f"count {count} exceeds the version's {total_bytes} bytes"
    assert (info.value.policy_id, info.value.version, info.value.index) == ("arm", 1, 0)


def test_parts_adding_up_to_more_than_the_version_are_rejected() -> None:
    assembler = Assembler("arm")
    parts = [Chunk("arm", 1, i, 3, 10, 0, "float32", b"12345") for i in range(3)]
    assert assembler.add(parts[0]) is None and assembler.add(parts[1]) is None
    with pytest.raises(ChunkError) as info:
        assembler.add(parts[2])
    assert info.value.reason == "parts add up to more than the version's 10 bytes"
    assert (info.value.policy_id, info.value.index) == ("arm", 2)


def test_a_chunk_message_holding_a_plain_list_gives_those_bytes() -> None:
    codec = default_codec()
    chunk = split_weights(_weights(), "arm", chunk_size=64)[0]
    msg = chunk_to_msg(chunk, codec, 1_700_000_000_123_456_789)
    assert msg.header.frame_id == "" and (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1_700_000_000, 123456789)
    msg.data = [1, 2, 255]  # e.g. a hand-built message
    assert chunk_from_msg(msg).data == b"\x01\x02\xff"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_payload_size_is_known_before_any_weights_exist(dtype: torch.dtype) -> None:
    weights = _weights(dtype=dtype)
    assert payload_size(weights.spec, dtype) == len(encode_payload(weights)[0])


def test_an_unsupported_dtype_is_refused_naming_the_supported_ones() -> None:
    weights = FlatWeights(torch.zeros(4, dtype=torch.int32), WeightSpec(("w",), ((4,),)), 1)
    with pytest.raises(PayloadError) as info:
        split_weights(weights, "arm")
    assert str(info.value) == (
        "weights of dtype torch.int32 cannot be sent; use one of ['bfloat16', 'float16', 'float32', 'float64']"
    )


def test_flat_weights_that_do_not_match_their_spec_are_refused() -> None:
    weights = FlatWeights(torch.zeros(3), WeightSpec(("w",), ((4,),)), 1)
    with pytest.raises(PayloadError, match="^flat weights hold 3 values, their spec says 4$"):
        encode_payload(weights)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_weights_without_values_round_trip(dtype: torch.dtype) -> None:
    empty = FlatWeights(torch.zeros(0, dtype=dtype), WeightSpec(("w",), ((0, 3),)), 2)
    got = _join(split_weights(empty, "arm"))
    assert got.data.shape == (0,) and got.data.dtype == dtype and got.spec == empty.spec and got.version == 2


def test_a_big_endian_host_refuses_to_send(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "byteorder", "big")
    with pytest.raises(PayloadError, match="^weight payloads are little-endian; this host is big-endian$"):
        split_weights(_weights(), "arm")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_weights_on_an_accelerator_are_sent_from_host_memory() -> None:
    weights = _weights()
    on_gpu = FlatWeights(weights.data.to("cuda"), weights.spec, weights.version)
    assert torch.equal(_join(split_weights(on_gpu, "arm", chunk_size=64)).data, weights.data)


# ---- whole-version checks and what a refused version must not block (issue 13, finding 3) ------------------


def _nan_weights(version: int) -> FlatWeights:
    good = _weights(version=version)
    data = good.data.clone()
    data[-1] = float("nan")  # the last value: the last parameter
    return FlatWeights(data, good.spec, version)


def test_a_version_that_is_not_finite_is_refused_and_does_not_count_as_received() -> None:
    assembler = Assembler("arm")
    chunks = split_weights(_nan_weights(4), "arm", chunk_size=64)
    for chunk in chunks[:-1]:
        assert assembler.add(chunk) is None
    last = _weights().spec.names[-1]
    with pytest.raises(PayloadError, match=rf"^weights of policy 'arm' version 4: weights\.{last} are not finite"):
        assembler.add(chunks[-1])
    assert assembler.completed_version == -1 and assembler.pending_version is None
    good = split_weights(_weights(version=4), "arm", chunk_size=64)  # the same version, intact, still gets in
    assert [assembler.add(c) for c in good][-1] is not None and assembler.completed_version == 4


def test_a_version_of_another_layout_is_refused_when_the_layout_is_known() -> None:
    spec = _weights().spec
    other = MLPPolicy(MLPPolicyConfig(state_dim=5, action_dim=2, hidden=(8,), seed=0))
    other.version = 2**40
    (chunk,) = split_weights(other.get_weights(), "arm")
    assembler = Assembler("arm", spec)
    with pytest.raises(PayloadError, match=r"version 1099511627776: weights do not fit the policy"):
        assembler.add(chunk)
    assert assembler.completed_version == -1
    assert Assembler("arm").add(chunk) is not None  # without a layout to expect, the same version is taken
    (real,) = split_weights(_weights(version=2), "arm")
    assert assembler.add(real) is not None and assembler.completed_version == 2


def test_a_stalled_higher_version_does_not_hold_a_lower_one_back() -> None:
    assembler = Assembler("arm")
    stalled = split_weights(_weights(version=2**40, seed=1), "arm", chunk_size=64)
    assert assembler.add(stalled[0]) is None and assembler.pending_version == 2**40
    result = None
    for chunk in split_weights(_weights(version=7, seed=2), "arm", chunk_size=64):
        result = assembler.add(chunk) or result
    assert result is not None and result.version == 7 and assembler.completed_version == 7
    assert assembler.pending_version == 2**40 and assembler.dropped_versions == 0  # still waiting, harmless
    older = split_weights(_weights(version=5), "arm", chunk_size=64)
    assert all(assembler.add(c) is None for c in older)  # below the completed one: ignored


def test_two_versions_below_the_newest_keep_the_higher_one() -> None:
    assembler = Assembler("arm")
    v9, v5, v6 = (split_weights(_weights(version=v, seed=v), "arm", chunk_size=64) for v in (9, 5, 6))
    assembler.add(v9[0])
    assembler.add(v5[0])
    assembler.add(v6[0])  # supersedes 5 below 9
    assert assembler.dropped_versions == 1
    assert assembler.add(v5[1]) is None  # 5 is older than both being assembled: ignored, not restarted
    result = None
    for chunk in v6[1:]:
        result = assembler.add(chunk) or result
    assert result is not None and result.version == 6


def test_only_the_expected_publisher_s_chunks_are_taken_and_a_version_keeps_one_publisher() -> None:
    chunks = split_weights(_weights(version=3), "arm", chunk_size=64, publisher="learner_a")
    assert {c.publisher for c in chunks} == {"learner_a"}
    strict = Assembler("arm", publisher="learner_a")
    with pytest.raises(ChunkError, match="published by 'learner_b', not by 'learner_a'"):
        strict.add(dataclasses.replace(chunks[0], publisher="learner_b"))
    mixed = Assembler("arm")
    mixed.add(chunks[0])
    with pytest.raises(ChunkError, match="publisher 'learner_b' differs from 'learner_a' of earlier chunks"):
        mixed.add(dataclasses.replace(chunks[1], publisher="learner_b"))
    assert [strict.add(c) for c in chunks][-1] is not None


def test_the_publisher_travels_as_the_header_frame() -> None:
    (chunk,) = split_weights(_weights(), "arm", publisher="learner_a")
    codec = default_codec()
    msg = chunk_to_msg(chunk, codec, 5)
    assert msg.header.frame_id == "learner_a"
    assert chunk_from_msg(codec.decode(codec.encode(msg), "user/msg/WeightChunk")) == chunk


def test_rewind_makes_a_version_receivable_again() -> None:
    assembler = Assembler("arm")
    chunks = split_weights(_weights(version=3), "arm")
    assert assembler.add(chunks[0]) is not None
    assert assembler.add(chunks[0]) is None  # received: ignored
    assembler.rewind(2)
    assert assembler.completed_version == 2 and assembler.add(chunks[0]) is not None
    assembler.rewind(7)  # never forward
    assert assembler.completed_version == 3
