"""Messages written with an older definition: decoded as written (`codec_for`), carried to today's type
(`migrate`), a field the older one lacks at its default, a field today's type dropped refused by name."""

from __future__ import annotations

import pytest

from test.buffer import factories as f
from test.interfaces.older import older_codec, older_transition_msg
from user.interfaces.codec import DecodeError, default_codec
from user.interfaces.convert import MessageDataError
from user.interfaces.domain import transition_from_msg
from user.interfaces.evolve import codec_for, migrate

TRANSITION = "user/msg/Transition"


def test_today_s_definitions_give_today_s_codec() -> None:
    codec = default_codec()
    same = {TRANSITION: ("ros2msg", codec.definition(TRANSITION))}
    assert codec_for(same, codec) is codec
    assert codec_for({}, codec) is codec


def test_bytes_of_an_older_definition_decode_with_it_and_migrate_with_defaults() -> None:
    today, yesterday = default_codec(), older_codec()
    written = f.transition("arm", 3, 1, 4, version=5, intervened=True)
    raw = yesterday.encode(older_transition_msg(written, yesterday), TRANSITION)
    with pytest.raises(DecodeError):
        today.decode(raw, TRANSITION)  # what reading an older segment with today's codec did
    reader = codec_for({TRANSITION: ("ros2msg", yesterday.definition(TRANSITION))}, today)
    assert reader is not today
    old = reader.decode(raw, TRANSITION)
    back = transition_from_msg(old)  # the domain conversion reads the fields it lacks as defaults
    assert (back.action.chunk_seq, back.action.chunk_index) == (0, 0)
    assert back.action.policy_version == 5 and back.action.intervened and back.observation.step == 1
    moved = migrate(old, reader, today)
    assert (moved.action.chunk_seq, moved.action.chunk_index) == (0, 0)
    again = transition_from_msg(today.decode(today.encode(moved, TRANSITION), TRANSITION))
    assert again.action.policy_version == 5 and again.observation.images == written.observation.images


def test_a_field_today_s_type_dropped_is_refused_by_name() -> None:
    today, other = default_codec(), older_codec(extra="uint32 retired_field\n")
    msg = older_transition_msg(f.transition("arm", 0, 0, 2), other)
    with pytest.raises(MessageDataError, match="retired_field"):
        migrate(msg, other, today)


def test_a_definition_that_does_not_parse_is_named() -> None:
    with pytest.raises(ValueError, match=TRANSITION):
        codec_for({TRANSITION: ("ros2msg", "uint32[ broken\n")}, default_codec())
