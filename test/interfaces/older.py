"""A codec as an older version of the project had it: user/msg/Action without the fields added since."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from user.interfaces.codec import Codec, default_codec
from user.interfaces.convert import from_data, to_data
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.typestore import types_from_definition, typestore_with

ACTION_MSG = Path(__file__).resolve().parents[2] / "msg" / "Action.msg"
ADDED_TO_ACTION = ("chunk_seq", "chunk_index")  # chunk provenance


def older_codec(dropped: tuple[str, ...] = ADDED_TO_ACTION, extra: str = "") -> Codec:
    """Today's codec with user/msg/Action lacking the fields `dropped` (and with the lines `extra` appended)."""
    lines = [
        line
        for line in ACTION_MSG.read_text().splitlines()
        if not any(line.split("#")[0].split()[1:2] == [name] for name in dropped)
    ]
    text = "\n".join(lines) + "\n" + extra
    types = types_from_definition("user/msg/Action", "ros2msg", text)
    return Codec(typestore_with(types, default_codec().typestore))


def older_transition_msg(t: Transition, codec: Codec, dropped: tuple[str, ...] = ADDED_TO_ACTION) -> Any:
    """user/msg/Transition of `t` as `codec` (an `older_codec(dropped)`) builds it."""
    today = default_codec()
    data = to_data(transition_to_msg(t, today), today)
    for name in dropped:
        del data["action"][name]
    return from_data("user/msg/Transition", data, codec)
