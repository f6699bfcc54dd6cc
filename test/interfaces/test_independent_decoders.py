"""Our CDR bytes checked against decoders and encoders that share no code with `rosbags`.

* `mcap-ros2-support` (Foxglove's pure-Python CDR implementation, driven by the same ros2msg schema
  text we put into MCAP files) decodes what our codec encodes, for every message in msg/, both halves of
  every service in srv/, and three standard types. Every field gets a non-default, varied value
  (nested messages, sequences of strings and messages, real JPEG bytes), so a wrong width, order,
  alignment or length prefix shows up as a mismatch.
* `cyclonedds` (the Eclipse Cyclone DDS Python binding, its own XCDR serializer) encodes
  std_msgs/String under the DDS type name ROS 2 uses, and our codec decodes it, and the other way round.
"""

import random
import zlib
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import pytest
from cyclonedds.idl import IdlStruct
from mcap_ros2._dynamic import generate_dynamic, serialize_dynamic
from rosbags.interfaces import Nodetype

from user.interfaces import default_codec
from user.interfaces.convert import to_data

CODEC = default_codec()
STANDARD_TYPES = ["std_msgs/msg/String", "sensor_msgs/msg/JointState", "sensor_msgs/msg/CompressedImage"]
USER_TYPES = [t for t in sorted(CODEC.typestore.types) if t.startswith("user/")]
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
# rosidl's member for a struct without fields: always 0 on the wire, absent from the ros2msg schema text.
PLACEHOLDER = "structure_needs_at_least_one_member"

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (1, 2**8 - 1),
    "byte": (1, 2**8 - 1),
    "char": (1, 2**8 - 1),
    "uint16": (1, 2**16 - 1),
    "uint32": (1, 2**32 - 1),
    "uint64": (1, 2**64 - 1),
}
_NUMPY = {"float32": np.float32, "float64": np.float64, "bool": np.bool_} | {
    name: np.dtype(name) for name in _INT_RANGES if name not in {"byte", "char"}
}
_ALPHABET = "abcXYZ019 _-/é漢"


# ---------------------------------------------------------------------------------------- value filler


def _scalar(basetype: str, rng: random.Random) -> Any:
    if basetype in {"string", "wstring"}:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 11)))
    if basetype == "bool":
        return rng.random() < 0.6
    if basetype == "float32":
        return float(np.float32(rng.uniform(-1e4, 1e4)))  # exactly representable after the round trip
    if basetype == "float64":
        return rng.uniform(-1e9, 1e9)
    low, high = _INT_RANGES[basetype]
    # Mostly large magnitudes, so every byte of the field matters; never zero (the default).
    value = rng.choice([low, high, rng.randint(low, high), rng.randint(1, 100)])
    return value or 1


def _jpeg(rng: random.Random) -> np.ndarray:
    pixels = np.random.default_rng(rng.randrange(2**32)).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    ok, encoded = cv2.imencode(".jpg", pixels)
    assert ok
    return np.asarray(encoded, dtype=np.uint8).reshape(-1)


def _value(desc: Any, rng: random.Random) -> Any:
    kind, detail = desc
    if kind == Nodetype.BASE:
        return _scalar(detail[0], rng)
    if kind == Nodetype.NAME:
        return sample_message(detail, rng)
    sub, count = detail
    length = count if kind == Nodetype.ARRAY else rng.randint(1, 4)
    items = [_value(sub, rng) for _ in range(length)]
    sub_kind, sub_detail = sub
    if sub_kind == Nodetype.BASE and sub_detail[0] in _NUMPY:
        return np.array(items, dtype=_NUMPY[sub_detail[0]])
    return items


def sample_message(typename: str, rng: random.Random) -> Any:
    """A message of `typename` with every field set to a varied, non-default value."""
    _, fields = CODEC.typestore.fielddefs[typename]
    values = {name: 0 if name == PLACEHOLDER else _value(desc, rng) for name, desc in fields}
    if typename == COMPRESSED_IMAGE:
        values.update(format="jpeg", data=_jpeg(rng))
    return CODEC.msg_class(typename)(**values)


def _rng(typename: str) -> random.Random:
    return random.Random(zlib.crc32(typename.encode()))


def _plain(value: Any) -> Any:
    """An `mcap_ros2` decoded value as the same plain data `to_data` gives for our messages."""
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "__slots__") and not isinstance(value, (str, int, float)):
        return {name: _plain(getattr(value, name)) for name in value.__slots__}
    return value


def _independent(typename: str) -> tuple[Any, Any]:
    """mcap_ros2's decoder and encoder for `typename`, built from the schema text we write to MCAP."""
    schema = CODEC.definition(typename)
    return generate_dynamic(typename, schema)[typename], serialize_dynamic(typename, schema)[typename]


# ------------------------------------------------------------------------------------ mcap-ros2-support


@pytest.mark.parametrize("typename", USER_TYPES + STANDARD_TYPES)
def test_mcap_ros2_decodes_our_bytes(typename: str) -> None:
    msg = sample_message(typename, _rng(typename))
    expected = {k: v for k, v in to_data(msg, CODEC).items() if k != PLACEHOLDER}
    decode, _ = _independent(typename)

    decoded = _plain(decode(CODEC.encode(msg, typename)))

    assert list(decoded) == list(expected)  # same fields, same order
    assert decoded == expected


@pytest.mark.parametrize("typename", USER_TYPES + STANDARD_TYPES)
def test_mcap_ros2_bytes_decode_with_ours_and_match_ours(typename: str) -> None:
    msg = sample_message(typename, _rng(typename))
    _, encode = _independent(typename)

    theirs = encode(to_data(msg, CODEC))

    assert to_data(CODEC.decode(theirs, typename), CODEC) == to_data(msg, CODEC)
    assert theirs == CODEC.encode(msg, typename)  # plain CDR has one encoding: the bytes are identical


def test_observation_images_survive_as_real_jpeg() -> None:
    msg = sample_message("user/msg/Observation", _rng("images"))
    assert msg.images and all(image.format == "jpeg" for image in msg.images)
    decode, _ = _independent("user/msg/Observation")

    decoded = decode(CODEC.encode(msg))

    assert len(decoded.images) == len(msg.images)
    for ours, theirs in zip(msg.images, decoded.images, strict=True):
        assert theirs.header.frame_id == ours.header.frame_id
        assert theirs.data == ours.data.tobytes()
        picture = cv2.imdecode(np.frombuffer(theirs.data, dtype=np.uint8), cv2.IMREAD_COLOR)
        assert picture is not None and picture.shape == (12, 16, 3)


# ------------------------------------------------------------------------------------------- cyclonedds


@dataclass
class DdsString(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    """std_msgs/String exactly as rosidl_typesupport declares it to DDS (no `from __future__ import
    annotations` in this module: cyclonedds resolves string annotations and cannot find `str`)."""

    data: str


# Lengths 0..8 cover every amount of padding after the string; then multi-byte UTF-8 and a long one.
CYCLONE_STRINGS = ["abcdefgh"[:n] for n in range(9)] + ["héllo wörld ✓", "x" * 1000]


@pytest.mark.parametrize("text", CYCLONE_STRINGS, ids=lambda s: f"len{len(s)}")
def test_cyclonedds_bytes_decode_with_ours(text: str) -> None:
    wire = DdsString(data=text).serialize()
    assert wire[:2] == b"\x00\x01"  # plain CDR, little endian: what ROS 2 publishes

    assert CODEC.decode(wire, "std_msgs/msg/String").data == text


@pytest.mark.parametrize("text", CYCLONE_STRINGS, ids=lambda s: f"len{len(s)}")
def test_our_bytes_decode_with_cyclonedds(text: str) -> None:
    ours = CODEC.encode(CODEC.msg_class("std_msgs/msg/String")(data=text))

    assert DdsString.deserialize(ours) == DdsString(data=text)
    assert ours == DdsString(data=text).serialize()


@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "abcd"])
def test_rmw_trailing_padding_is_accepted(text: str) -> None:
    """RMW layers pad the payload to 4 bytes and record the pad count in the options field."""
    wire = DdsString(data=text).serialize()
    pad = -len(wire) % 4
    padded = wire[:2] + bytes([0, pad]) + wire[4:] + b"\x00" * pad

    assert CODEC.decode(padded, "std_msgs/msg/String").data == text
    assert DdsString.deserialize(padded).data == text
