"""The codec: every interface round-trips; bad bytes and bad values give typed errors."""

from __future__ import annotations

import numpy as np
import pytest

from user.interfaces import DecodeError, EncodeError, UnknownTypeError, default_codec
from user.interfaces.codec import normalize_typename
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
