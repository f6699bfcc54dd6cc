"""Compressed, delta-coded weight payloads (issue 15, `user.sync.delta`): bit-exact round trips, each tensor the
smallest of raw/zlib/delta, a delta never decoded against the wrong base, keyframes on schedule and on request,
and a late joiner amid deltas served through a real Zenoh router."""

from __future__ import annotations

import json
import re
import struct

import pytest
import torch

from user.policies.base import FlatWeights, WeightSpec
from user.sync.assembler import Assembler
from user.sync.chunking import split_weights
from user.sync.delta import BaseMissingError, DeltaDecoder, DeltaEncoder
from user.sync.errors import PayloadError

SPEC = WeightSpec(("layer.weight", "layer.bias", "head.weight"), ((64, 32), (64,), (4, 64)))


def _versions(n: int, dtype: torch.dtype, seed: int = 0) -> list[FlatWeights]:
    """A training-like walk: small steps from one version to the next."""
    gen = torch.Generator().manual_seed(seed)
    data = torch.randn(SPEC.numel, generator=gen) * 0.1
    out = []
    for version in range(1, n + 1):
        data = data + 1e-3 * torch.randn(SPEC.numel, generator=gen)
        out.append(FlatWeights(data.to(dtype), SPEC, version))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_versions_round_trip_bit_exactly_and_deltas_are_smaller(dtype: torch.dtype) -> None:
    encoder, decoder = DeltaEncoder(keyframe_every=100), DeltaDecoder()
    sizes = []
    for weights in _versions(6, dtype):
        payload = encoder.encode(weights)
        got = decoder.decode(payload, dtype, weights.version)
        assert torch.equal(got.data.view(torch.uint8), weights.data.view(torch.uint8)) and got.spec == SPEC
        decoder.remember(got)
        sizes.append(len(payload))
        stats = encoder.last_stats
        assert stats is not None and stats.sent_bytes <= stats.raw_bytes
    raw = SPEC.numel * torch.empty(0, dtype=dtype).element_size()
    assert encoder.last_stats is not None and encoder.last_stats.encodings.get("delta", 0) >= 1
    assert max(sizes[1:]) < sizes[0] < raw + 500  # deltas beat the keyframe; the keyframe never much above raw


def test_each_tensor_takes_its_smallest_encoding() -> None:
    encoder = DeltaEncoder()
    first = FlatWeights(torch.zeros(SPEC.numel), SPEC, 1)  # all zeros: zlib wins everywhere
    encoder.encode(first)
    assert encoder.last_stats is not None and encoder.last_stats.encodings == {"zlib": 3}
    noise = torch.randn(SPEC.numel, generator=torch.Generator().manual_seed(3))
    encoder.encode(FlatWeights(noise, SPEC, 2))  # unrelated random values: nothing compresses
    assert encoder.last_stats is not None and encoder.last_stats.encodings.get("raw", 0) >= 1


def test_a_delta_without_its_base_is_refused_and_a_keyframe_recovers() -> None:
    encoder = DeltaEncoder()
    versions = _versions(3, torch.float32)
    encoder.encode(versions[0])
    delta = encoder.encode(versions[1])
    late = DeltaDecoder()  # never saw version 1
    with pytest.raises(BaseMissingError, match="a delta on version 1, but version -1 is held"):
        late.decode(delta, torch.float32, 2)
    keyframe = encoder.encode(versions[1], keyframe=True)
    assert torch.equal(late.decode(keyframe, torch.float32, 2).data, versions[1].data)


def test_a_delta_on_a_base_with_other_bytes_fails_its_checksum() -> None:
    encoder, decoder = DeltaEncoder(), DeltaDecoder()
    a, b = _versions(2, torch.float32)
    encoder.encode(a)
    delta = encoder.encode(b)
    decoder.remember(FlatWeights(a.data + 1.0, SPEC, a.version))  # the same version number, other bytes
    with pytest.raises(PayloadError, match="do not match the header"):
        decoder.decode(delta, torch.float32, b.version)


def test_keyframes_come_every_keyframe_every_versions() -> None:
    encoder = DeltaEncoder(keyframe_every=3)
    kinds = []
    for weights in _versions(7, torch.float32):
        encoder.encode(weights)
        assert encoder.last_stats is not None
        kinds.append("delta" in encoder.last_stats.encodings)
    assert kinds == [False, True, True, False, True, True, False]


def test_a_damaged_tensor_is_refused() -> None:
    payload = bytearray(DeltaEncoder().encode(_versions(1, torch.float32)[0]))
    payload[-5] ^= 0xFF
    with pytest.raises(PayloadError):
        DeltaDecoder().decode(bytes(payload), torch.float32, 1)


def test_the_assembler_yields_delta_versions_and_refuses_a_gap() -> None:
    encoder = DeltaEncoder()
    versions = _versions(4, torch.float32)
    assembler = Assembler("arm", SPEC)
    for weights in versions[:2]:
        got = None
        for chunk in split_weights(weights, "arm", 2048, encoder=encoder):
            got = assembler.add(chunk) or got
        assert got is not None and torch.equal(got.data, weights.data)
    split_weights(versions[2], "arm", 2048, encoder=encoder)  # version 3 lost on the way
    chunks = split_weights(versions[3], "arm", 2048, encoder=encoder)
    with pytest.raises(BaseMissingError):
        for chunk in chunks:
            assembler.add(chunk)


def _keyframe(version: int = 1) -> bytes:
    return DeltaEncoder().encode(_versions(version, torch.float32)[-1])


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"UWF", "payload of 3 bytes is shorter than its prefix"),
        (b"UWF2\x00\x00\x00\x00", "bad payload header"),
        (b"UWF1\x00\x00\x00\x00", "payload does not start with b'UWF2'"),
        (b"UWF2\x02\x00\x00\x00[]", "bad payload header"),
    ],
)
def test_a_payload_that_does_not_parse_is_named(payload: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=re.escape(f"version 7: {message}")):
        DeltaDecoder().decode(payload, torch.float32, 7)


def _edit_header(payload: bytes, **changes: object) -> bytes:
    (head_len,) = struct.unpack_from("<I", payload, 4)
    meta = json.loads(payload[8 : 8 + head_len])
    for key, value in changes.items():
        if key.startswith("tensor0_"):
            meta["tensors"][0][key.removeprefix("tensor0_")] = value
        else:
            meta[key] = value
    head = json.dumps(meta).encode()
    blobs = payload[8 + head_len :]
    if changes.get("tensor0_enc") == "zlib":  # tensor 0 as zlib, its bytes no zlib stream
        blobs = b"\x00" * meta["tensors"][0]["len"] + blobs[meta["tensors"][0]["len"] :]
    return b"UWF2" + struct.pack("<I", len(head)) + head + blobs


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"numel": 5}, "header lists 3 tensors for 3 shapes"),
        ({"tensors": []}, "header lists 0 tensors for 3 shapes"),
        ({"tensor0_enc": "lzma"}, "tensor 0 has unknown encoding 'lzma'"),
        ({"tensor0_enc": "zlib"}, "tensor 0 (zlib) does not decode"),
        ({"base": 0}, "a delta on version 0, but version -1 is held"),
    ],
)
def test_a_header_that_does_not_fit_is_named(changes: dict[str, object], message: str) -> None:
    payload = _keyframe()
    if "base" in changes:  # make tensor 0 a delta on version 0
        changes = {**changes, "tensor0_enc": "delta"}
    with pytest.raises(PayloadError, match=re.escape(f"version 1: {message}")):
        DeltaDecoder().decode(_edit_header(payload, **changes), torch.float32, 1)


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(PayloadError, match="do not match the header"):
        DeltaDecoder().decode(_keyframe() + b"\x00", torch.float32, 1)


def test_a_delta_on_version_0_needs_version_0() -> None:
    encoder = DeltaEncoder()
    first, second = _versions(2, torch.float32)
    encoder.encode(FlatWeights(first.data, SPEC, 0))
    delta = encoder.encode(FlatWeights(second.data, SPEC, 1))
    with pytest.raises(BaseMissingError, match="a delta on version 0"):
        DeltaDecoder().decode(delta, torch.float32, 1)


def test_keyframe_every_is_checked_and_1_means_no_deltas() -> None:
    with pytest.raises(ValueError, match="keyframe_every must be at least 1, got 0"):
        DeltaEncoder(0)
    encoder = DeltaEncoder(1)
    for weights in _versions(3, torch.float32):
        encoder.encode(weights)
        assert encoder.last_stats is not None and "delta" not in encoder.last_stats.encodings


def test_weights_without_values_round_trip_in_their_dtype() -> None:
    empty = FlatWeights(torch.empty(0, dtype=torch.bfloat16), WeightSpec((), ()), 1)
    got = DeltaDecoder().decode(DeltaEncoder().encode(empty), torch.bfloat16, 1)
    assert got.data.dtype == torch.bfloat16 and got.data.numel() == 0
