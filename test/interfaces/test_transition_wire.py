"""Received Transition bytes the buffer may store as they came: exactly what encoding the decoded transition
gives, told without encoding (`is_canonical_transition`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from test.buffer.factories import transition
from user.interfaces import default_codec
from user.interfaces.codec import ENCODED_HEADER
from user.interfaces.domain import is_canonical_transition, transition_from_msg, transition_to_msg

CODEC = default_codec()
TYPE = "user/msg/Transition"


def _msg(images: bool = True) -> Any:
    return transition_to_msg(transition("arm", 3, 1, 4, version=2, images=images), CODEC)


def _fresh(msg: Any) -> bytes:
    """What the buffer would store for the transition `msg` carries."""
    return CODEC.encode(transition_to_msg(transition_from_msg(msg), CODEC))


@pytest.mark.parametrize("images", [True, False])
def test_bytes_this_codec_published_are_canonical(images: bool) -> None:
    payload = CODEC.encode(_msg(images))
    received = CODEC.decode(payload, TYPE)
    assert payload[:4] == ENCODED_HEADER and CODEC.encoded_size(received) == len(payload)
    assert is_canonical_transition(received, payload, CODEC)
    assert _fresh(received) == payload


def _set(path: str, value: object) -> Callable[[Any], None]:
    def change(msg: Any) -> None:
        *parents, last = path.split(".")
        for name in parents:
            msg = getattr(msg, name)
        setattr(msg, last, value)

    return change


@pytest.mark.parametrize(
    "change",
    [
        _set("robot_id", "other"),  # the transition's robot, task, episode and step are the observation's
        _set("task", "other"),
        _set("episode_id", 99),
        _set("step", 7),
        _set("header.frame_id", "elsewhere"),  # the transition's frame is the observation's
        _set("action.header.frame_id", "tool"),  # the action's frame is not kept
        _set("header.stamp.nanosec", 1_500_000_000),  # a stamp that is not normalised comes back normalised
        _set("action.header.stamp.nanosec", 1_000_000_000),
        _set("observation.header.stamp.nanosec", 1_000_000_000),
        _set("next_observation.header.stamp.nanosec", 1_000_000_000),
        lambda msg: _set("header.stamp.nanosec", 1_000_000_000)(msg.observation.images[1]),
        lambda msg: _set("header.stamp.nanosec", 1_000_000_000)(msg.next_observation.images[0]),
    ],
)
def test_fields_the_transition_does_not_keep_as_sent_are_not_canonical(change: Callable[[Any], None]) -> None:
    msg = _msg()
    change(msg)
    payload = CODEC.encode(msg)
    received = CODEC.decode(payload, TYPE)
    assert _fresh(received) != payload  # storing the received bytes would store something else
    assert not is_canonical_transition(received, payload, CODEC)


def test_other_encodings_of_the_same_message_are_not_canonical() -> None:
    msg = _msg()
    payload = CODEC.encode(msg)
    big_endian = bytes(CODEC.typestore.serialize_cdr(msg, TYPE, little_endian=False))
    padded = payload + b"\x00\x00"  # trailing alignment, as some DDS serializers write it
    with_options = payload[:3] + b"\x02" + payload[4:]  # padding count in the encapsulation options
    for other in (big_endian, padded, with_options):
        received = CODEC.decode(other, TYPE)
        assert _fresh(received) == payload != other
        assert not is_canonical_transition(received, other, CODEC)
