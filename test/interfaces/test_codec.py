"""The codec: every interface round-trips; bad bytes and bad values give typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys.base import Nodetype  # type: ignore[attr-defined]

from user.interfaces import DecodeError, EncodeError, UnknownTypeError, default_codec
from user.interfaces.codec import ENCODED_HEADER, Codec, normalize_typename
from user.interfaces.convert import MessageDataError, from_data, to_data
from user.interfaces.domain import EncodedImage, Observation, observation_from_msg, observation_to_msg
from user.interfaces.idl import read_interfaces
from user.interfaces.images import ImageCodecError, decode_image, encode_jpeg

CODEC = default_codec()


def test_every_definition_is_registered() -> None:
    files = read_interfaces()
    assert {f.path.stem for f in files if f.kind == "msg"} >= {
        "Observation",
        "Action",
        "Transition",
        "EpisodeEvent",
        "HumanReward",
        "HardwareDescriptor",
        "WeightChunk",
        "TrainingStats",
    }
    for item in files:
        if item.kind == "msg":
            assert CODEC.has_type(item.typename)
        else:
            assert CODEC.has_type(f"{item.typename}_Request") and CODEC.has_type(f"{item.typename}_Response")


def test_empty_request_gets_the_rosidl_placeholder_byte() -> None:
    req = from_data("user/srv/BufferStats_Request", {}, CODEC)
    assert CODEC.encode(req) == b"\x00\x01\x00\x00\x00"  # header + one uint8, as rosidl generates


@pytest.mark.parametrize("name", ["std_msgs/String", "std_msgs/msg/String", "std_msgs::msg::String"])
def test_type_names_are_normalised(name: str) -> None:
    assert normalize_typename(name) == "std_msgs/msg/String"
    assert CODEC.resolve(name) == "std_msgs/msg/String"


def test_unknown_type() -> None:
    with pytest.raises(UnknownTypeError, match="nope/msg/X"):
        CODEC.resolve("nope/msg/X")


def test_string_bytes_are_what_ros2_puts_on_the_wire() -> None:
    msg = CODEC.msg_class("std_msgs/msg/String")(data="hi")
    assert CODEC.encode(msg)[:11] == b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00"


def test_transition_roundtrip_through_plain_data() -> None:
    data = {
        "robot_id": "arx_1",
        "episode_id": 7,
        "reward": 0.5,
        "terminated": True,
        "observation": {"state": [1.0, -2.0], "images": [{"format": "jpeg", "data": [1, 2, 3]}]},
        "action": {"data": [0.1, 0.2], "intervened": True, "source": 1},
    }
    raw = CODEC.encode(from_data("user/msg/Transition", data, CODEC))
    back = to_data(CODEC.decode(raw, "user/msg/Transition"), CODEC)
    assert back["robot_id"] == "arx_1" and back["episode_id"] == 7 and back["terminated"] is True
    assert back["observation"]["state"] == [1.0, -2.0]
    assert back["observation"]["images"][0]["data"] == [1, 2, 3]
    assert back["action"]["intervened"] is True and back["action"]["source"] == 1
    assert back["next_observation"]["state"] == []


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"robt_id": "x"}, "has no field 'robt_id'"),
        ({"step": -1}, "out of range for uint32"),
        ({"step": 1.5}, "expected an integer"),
        ({"state": "abc"}, "expected a list"),
        ({"robot_id": 3}, "expected a string"),
        ({"images": [{"format": 1}]}, r"images\[0\]\.format: expected a string"),
    ],
)
def test_bad_plain_data_names_the_field(data: dict[str, object], fragment: str) -> None:
    with pytest.raises(MessageDataError, match=fragment):
        from_data("user/msg/Observation", data, CODEC)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00\x01",
        b"\x00\x01\x00\x00\xff\xff\xff\x7fabc",  # string longer than the payload
        b"\x09\x09\x00\x00\x01\x00\x00\x00\x00",  # unknown encapsulation
        b"\x00\x01\x00\x00\x03\x00\x00\x00hi\x00" + b"\x00" * 16,  # trailing junk
    ],
)
def test_malformed_bytes_raise_decode_error(payload: bytes) -> None:
    with pytest.raises(DecodeError) as err:
        CODEC.decode(payload, "std_msgs/msg/String")
    assert err.value.typename == "std_msgs/msg/String"


def test_truncated_observation_raises_decode_error() -> None:
    raw = CODEC.encode(from_data("user/msg/Observation", {"state": list(range(50))}, CODEC))
    for cut in (5, len(raw) // 2, len(raw) - 5):
        with pytest.raises(DecodeError):
            CODEC.decode(raw[:cut], "user/msg/Observation")


def test_encode_error_on_wrong_field_type() -> None:
    msg = CODEC.msg_class("std_msgs/msg/String")(data=12)
    with pytest.raises(EncodeError, match="std_msgs/msg/String"):
        CODEC.encode(msg)


def test_observation_domain_roundtrip_with_jpeg_images() -> None:
    rgb = np.zeros((128, 128, 3), np.uint8)
    rgb[32:96, 32:96] = (200, 30, 30)
    jpeg = encode_jpeg(rgb)
    obs = Observation(
        robot_id="franka_1",
        task="peg",
        episode_id=3,
        step=9,
        state=np.arange(7, dtype=np.float32),
        stamp_ns=1_700_000_000_123_456_789,
        images=(EncodedImage("wrist", "jpeg", jpeg, 1_700_000_000_000_000_001),),
        state_names=("a",),
        embodiment_id=2,
        policy_version=11,
        frame_id="fr3_link0",
    )
    back = observation_from_msg(CODEC.decode(CODEC.encode(observation_to_msg(obs, CODEC)), "user/msg/Observation"))
    assert back.images == obs.images and back.stamp_ns == obs.stamp_ns and back.frame_id == "fr3_link0"
    np.testing.assert_array_equal(back.state, obs.state)
    pixels = decode_image(back.images[0].data)
    assert pixels.shape == (128, 128, 3) and abs(int(pixels[64, 64, 0]) - 200) < 8


def test_image_codec_errors() -> None:
    with pytest.raises(ImageCodecError, match="HxWx3 uint8"):
        encode_jpeg(np.zeros((4, 4), np.float32))
    with pytest.raises(ImageCodecError, match="cannot decode"):
        decode_image(b"not an image")


# ---- round trips of every interface, typed errors, names ----------------------------------------------

STANDARD_TYPES_USED = [
    "builtin_interfaces/msg/Time",
    "geometry_msgs/msg/Point",
    "geometry_msgs/msg/Pose",
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/Quaternion",
    "geometry_msgs/msg/WrenchStamped",
    "sensor_msgs/msg/CompressedImage",
    "sensor_msgs/msg/Image",
    "sensor_msgs/msg/JointState",
    "std_msgs/msg/Bool",
    "std_msgs/msg/Header",
    "std_msgs/msg/String",
    "diagnostic_msgs/msg/KeyValue",
]


def _own_types() -> list[str]:
    names: list[str] = []
    for item in read_interfaces():
        names += [item.typename] if item.kind == "msg" else [f"{item.typename}_Request", f"{item.typename}_Response"]
    return names


def _sample(typename: str) -> dict[str, object]:
    """Plain data for `typename` with every field set to a value other than its default."""

    def value(desc: object) -> object:
        match desc:
            case (Nodetype.BASE, (base, _)):
                if base in ("string", "wstring"):
                    return "x\u00e9y"
                if base == "bool":
                    return True
                return 1.5 if str(base).startswith("float") else 7
            case (Nodetype.NAME, detail):
                return _sample(str(detail))
            case (_, (sub, int() as length)):  # an array or a sequence
                return [value(sub) for _ in range(length or 2)]
        raise AssertionError(f"unexpected field description {desc!r}")

    _, fields = CODEC.typestore.fielddefs[typename]
    return {name: value(desc) for name, desc in fields}


@pytest.mark.parametrize("typename", _own_types() + STANDARD_TYPES_USED)
def test_every_interface_round_trips_with_every_field_set(typename: str) -> None:
    data = _sample(typename)
    raw = CODEC.encode(from_data(typename, data, CODEC))
    assert raw[:4] == b"\x00\x01\x00\x00" == ENCODED_HEADER  # little-endian CDR, as ROS 2 sends
    msg = CODEC.decode(raw, typename)
    assert msg.__msgtype__ == typename
    assert to_data(msg, CODEC) == data
    assert CODEC.encoded_size(msg) == CODEC.encoded_size(msg, typename) == len(raw)  # told without encoding


def test_encoded_size_is_taken_for_the_type_given() -> None:
    header = CODEC.msg_class("std_msgs/Header")(
        stamp=CODEC.msg_class("builtin_interfaces/Time")(sec=1, nanosec=0), frame_id="ab"
    )
    assert CODEC.encoded_size(header) == len(CODEC.encode(header)) == 4 + 8 + 4 + 3
    with pytest.raises(UnknownTypeError):
        CODEC.encoded_size(header, "nope/msg/X")
    with pytest.raises(AttributeError):
        CODEC.encoded_size(header, "std_msgs/String")  # a Header has no String's field


def test_big_endian_cdr_is_decoded_too() -> None:
    msg = CODEC.decode(b"\x00\x00\x00\x00\x00\x00\x00\x03hi\x00", "std_msgs/String")
    assert msg.data == "hi"


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "payload of 0 bytes is shorter than the CDR header"),
        (b"\x00\x01\x00", "payload of 3 bytes is shorter than the CDR header"),
        (b"\x00\x02\x00\x00\x03\x00\x00\x00hi\x00", "unknown CDR encapsulation 0002"),
        (b"\x01\x00\x00\x00\x03\x00\x00\x00hi\x00", "unknown CDR encapsulation 0100"),
    ],
)
def test_a_malformed_payload_names_the_type_and_what_was_wrong(payload: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        CODEC.decode(payload, "std_msgs/String")
    assert err.value.typename == "std_msgs/msg/String" and err.value.reason == reason
    assert str(err.value) == f"cannot decode std_msgs/msg/String: {reason}"


def test_a_header_without_a_body_is_reported_as_a_short_body_not_a_missing_header() -> None:
    req = CODEC.decode(b"\x00\x01\x00\x00\x00", "user/srv/BufferStats_Request")
    assert req.__msgtype__ == "user/srv/BufferStats_Request"
    with pytest.raises(DecodeError) as err:
        CODEC.decode(b"\x00\x01\x00\x00", "user/srv/BufferStats_Request")  # the header, but not its one byte
    assert err.value.typename == "user/srv/BufferStats_Request"
    assert "shorter than the CDR header" not in err.value.reason and "BufferStats_Request" in err.value.reason


def test_the_decoders_own_explanation_is_passed_on() -> None:
    with pytest.raises(DecodeError) as err:
        CODEC.decode(b"\x00\x01\x00\x00" + b"\xff" * 8, "std_msgs/Bool")  # seven bytes too many
    assert err.value.reason == "CDR message size mismatch for 'std_msgs/msg/Bool'."


class _SilentStore:
    """A typestore whose decoder fails without a message."""

    types = CODEC.typestore.types

    def deserialize_cdr(self, raw: bytes, typename: str) -> object:
        raise IndexError


def test_a_decoder_failure_without_a_message_is_named_by_its_kind() -> None:
    codec = Codec(_SilentStore())  # type: ignore[arg-type]
    with pytest.raises(DecodeError) as err:
        codec.decode(b"\x00\x01\x00\x00\x00", "std_msgs/String")
    assert err.value.reason == "IndexError"
    assert str(err.value) == "cannot decode std_msgs/msg/String: IndexError"


def test_decode_accepts_bytearray_and_memoryview() -> None:
    raw = CODEC.encode(CODEC.msg_class("std_msgs/String")(data="hi"))
    assert CODEC.decode(bytearray(raw), "std_msgs/String").data == "hi"
    assert CODEC.decode(memoryview(raw), "std_msgs/String").data == "hi"
    with pytest.raises(DecodeError, match="shorter than the CDR header"):
        CODEC.decode(memoryview(raw)[:3], "std_msgs/String")


def test_a_truncated_payload_names_the_type_and_the_cause() -> None:
    raw = CODEC.encode(from_data("user/msg/WeightChunk", {"data": list(range(40))}, CODEC))
    with pytest.raises(DecodeError) as err:
        CODEC.decode(raw[:-10], "user/WeightChunk")
    assert err.value.typename == "user/msg/WeightChunk"
    assert str(err.value).startswith("cannot decode user/msg/WeightChunk: ") and err.value.reason


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("user/WeightChunk", "user/msg/WeightChunk"),
        ("user::msg::Observation", "user/msg/Observation"),
        ("/geometry_msgs/msg/Pose/", "geometry_msgs/msg/Pose"),
        ("user/srv/Reset_Request", "user/srv/Reset_Request"),
    ],
)
def test_short_and_ros_style_names_resolve_to_the_canonical_name(name: str, canonical: str) -> None:
    assert CODEC.resolve(name) == canonical
    assert CODEC.has_type(name)
    assert CODEC.msg_class(name).__msgtype__ == canonical


@pytest.mark.parametrize("name", ["user/Nope", "nope/msg/X", "Observation", ""])
def test_unknown_names_raise_unknown_type_error_with_the_name_given(name: str) -> None:
    assert not CODEC.has_type(name)
    with pytest.raises(UnknownTypeError) as err:
        CODEC.resolve(name)
    assert str(err.value) == f"unknown message type {name!r}"
    with pytest.raises(UnknownTypeError):
        CODEC.msg_class(name)
    with pytest.raises(UnknownTypeError):
        CODEC.decode(b"\x00\x01\x00\x00", name)
    assert str(UnknownTypeError()) == "unknown message type"


def test_encode_uses_the_message_type_unless_told_otherwise() -> None:
    header = CODEC.msg_class("std_msgs/Header")
    stamp = CODEC.msg_class("builtin_interfaces/Time")(sec=1, nanosec=2)
    msg = header(stamp=stamp, frame_id="base")
    raw = CODEC.encode(msg)
    assert CODEC.encode(msg, "std_msgs/Header") == raw
    assert CODEC.decode(raw, "std_msgs/msg/Header").frame_id == "base"
    with pytest.raises(EncodeError, match="cannot encode std_msgs/msg/String: "):
        CODEC.encode(msg, "std_msgs/String")  # a Header is no String


def test_every_own_type_and_standard_type_used_is_registered() -> None:
    names = set(CODEC.typestore.types)
    assert set(_own_types() + STANDARD_TYPES_USED) <= names
    assert all(CODEC.has_type(n) for n in names)


def test_definition_is_the_full_ros2msg_text_with_dependencies() -> None:
    text = CODEC.definition("user/WeightChunk")
    assert text.startswith("std_msgs/Header header\nstring policy_id\n")
    assert "MSG: std_msgs/Header" in text and "MSG: builtin_interfaces/Time" in text
    with pytest.raises(UnknownTypeError):
        CODEC.definition("user/Nope")


def test_default_codec_is_one_per_process() -> None:
    assert default_codec() is default_codec()
