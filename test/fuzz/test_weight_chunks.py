"""Weight chunks from the wire: any sequence of chunks (real ones of a version, damaged ones, forged ones, a whole
version of NaN values) makes the assembler yield only whole, checksummed, finite versions of the expected layout
(and publisher, when it expects one) or raise a `WeightSyncError`; never another exception, and never a version it
did not receive whole."""

from __future__ import annotations

import dataclasses
import zlib

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from test.fuzz.strategies import CI, mutated
from user.policies.base import FlatWeights, WeightSpec
from user.sync.assembler import Assembler
from user.sync.chunking import Chunk, decode_payload, split_weights
from user.sync.errors import PayloadError, WeightSyncError

POLICY = "arm"
SPEC = WeightSpec(("w", "b"), ((3, 2), (2,)))
PUBLISHER = "learner"
WEIGHTS = FlatWeights(torch.arange(8, dtype=torch.float32), SPEC, 5)
REAL = split_weights(WEIGHTS, POLICY, chunk_size=16, publisher=PUBLISHER)  # several chunks
NAN = FlatWeights(torch.tensor([0, 1, float("nan"), 3, 4, 5, 6, 7], dtype=torch.float32), SPEC, 6)
POISONED = split_weights(NAN, POLICY, chunk_size=16, publisher=PUBLISHER)  # whole and checksummed, yet NaN
OTHER_LAYOUT = split_weights(  # whole and checksummed, of another layout, with a huge version
    FlatWeights(torch.zeros(8), WeightSpec(("w",), ((8,),)), 2**40), POLICY, chunk_size=16, publisher=PUBLISHER
)


def _payload() -> bytes:
    return b"".join(c.data for c in REAL)


FORGED = st.builds(
    Chunk,
    policy_id=st.sampled_from([POLICY, "other", ""]),
    version=st.integers(-3, 2**63 - 1),
    index=st.integers(-2, 2**31),
    count=st.integers(-2, 2**31),
    total_bytes=st.integers(-2, 2**40),
    crc32=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from(["float32", "bfloat16", "float16", "float64", "int8", ""]),
    data=st.binary(max_size=64),
    publisher=st.sampled_from([PUBLISHER, "", "other"]),
)


@st.composite
def damaged(draw: st.DrawFn) -> Chunk:
    """A real chunk with one field or its bytes changed."""
    chunk = draw(st.sampled_from(REAL))
    field = draw(st.sampled_from(["data", "version", "index", "count", "total_bytes", "crc32", "dtype", "publisher"]))
    if field == "data":
        return dataclasses.replace(chunk, data=draw(mutated(chunk.data)))
    if field == "publisher":
        return dataclasses.replace(chunk, publisher=draw(st.sampled_from(["", "other"])))
    if field == "dtype":
        return dataclasses.replace(chunk, dtype=draw(st.sampled_from(["bfloat16", "float64", "x"])))
    return dataclasses.replace(chunk, **{field: getattr(chunk, field) + draw(st.integers(-3, 3))})


CHUNKS = st.lists(
    st.one_of(st.sampled_from(REAL), damaged(), FORGED, st.sampled_from(POISONED), st.sampled_from(OTHER_LAYOUT)),
    max_size=20,
)


@CI
@given(chunks=CHUNKS, expecting=st.booleans())
def test_any_chunk_sequence_yields_whole_versions_or_typed_errors(chunks: list[Chunk], expecting: bool) -> None:
    """`expecting`: the assembler knows the layout and the publisher (as a robot's subscriber does)."""
    assembler = Assembler(POLICY, SPEC, PUBLISHER) if expecting else Assembler(POLICY)
    for chunk in chunks:
        try:
            weights = assembler.add(chunk)
        except WeightSyncError:
            continue
        if weights is not None:  # a version came out: it is exactly what some sender sent whole and intact
            assert weights.data.numel() == weights.spec.numel
            assert bool(torch.isfinite(weights.data).all())  # never the poisoned version
            assert assembler.completed_version == weights.version
            if expecting:
                assert weights.spec == SPEC and torch.equal(weights.data, WEIGHTS.data)


@CI
@given(payload=st.one_of(st.binary(max_size=256), mutated(_payload())), dtype=st.sampled_from(["float32", "bfloat16"]))
def test_any_payload_decodes_or_raises_a_payload_error(payload: bytes, dtype: str) -> None:
    try:
        weights = decode_payload(payload, dtype, 1)
    except WeightSyncError:
        return
    assert weights.data.numel() == weights.spec.numel


def test_the_real_chunks_assemble() -> None:
    """The strategies start from a version that does assemble (so the tests above exercise both outcomes)."""
    assembler = Assembler(POLICY, SPEC, PUBLISHER)
    out = [assembler.add(c) for c in REAL]
    assert out[-1] is not None and torch.equal(out[-1].data, WEIGHTS.data)
    assert zlib.crc32(_payload()) == REAL[0].crc32 and len(REAL) > 1


def test_the_poisoned_and_other_layout_versions_are_whole_and_refused_whole() -> None:
    """They pass every chunk-level check, so only the whole-version checks (finite, layout) stop them."""
    for chunks, expecting in ((POISONED, False), (OTHER_LAYOUT, True)):
        assembler = Assembler(POLICY, SPEC if expecting else None)
        assert [assembler.add(c) for c in chunks[:-1]] == [None] * (len(chunks) - 1)
        with pytest.raises(PayloadError):
            assembler.add(chunks[-1])
        assert assembler.completed_version == -1 and assembler.pending_version is None
