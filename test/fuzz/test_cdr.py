"""CDR from the wire: any bytes, and valid messages cut short or with bytes overwritten, either decode or raise
`DecodeError` naming the type, for every message type the nodes receive; never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test.fuzz.strategies import CI, mutated
from test.interfaces.test_codec import STANDARD_TYPES_USED, _own_types, _sample
from user.interfaces import DecodeError, default_codec
from user.interfaces.convert import from_data

CODEC = default_codec()
TYPES = _own_types() + STANDARD_TYPES_USED


def _valid(typename: str) -> bytes:
    return CODEC.encode(from_data(typename, _sample(typename), CODEC))


def _decodes_or_refuses(payload: bytes, typename: str) -> None:
    try:
        msg = CODEC.decode(payload, typename)
    except DecodeError as exc:
        assert exc.typename == typename and str(exc).startswith(f"cannot decode {typename}: ")
        return
    assert msg.__msgtype__ == typename
    CODEC.encode(msg)  # whatever decoded is a message the codec can send on


@pytest.mark.parametrize("typename", TYPES)
@CI
@given(payload=st.binary(max_size=512))
def test_random_bytes_decode_or_raise_decode_error(typename: str, payload: bytes) -> None:
    _decodes_or_refuses(payload, typename)


@pytest.mark.parametrize("typename", TYPES)
@CI
@given(data=st.data())
def test_damaged_messages_decode_or_raise_decode_error(typename: str, data: st.DataObject) -> None:
    _decodes_or_refuses(data.draw(mutated(_valid(typename))), typename)


@CI
@given(header=st.binary(min_size=4, max_size=4), body=st.binary(max_size=64))
def test_any_encapsulation_header_is_decoded_or_refused(header: bytes, body: bytes) -> None:
    _decodes_or_refuses(header + body, "user/msg/Transition")
