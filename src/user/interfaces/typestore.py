"""Build the `rosbags` typestore: ROS 2 Humble's standard types plus this package's msg/ and srv/, and, for
reading a foreign bag, a typestore extended by the message definitions the bag carries itself."""

from __future__ import annotations

import re
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from user.interfaces.idl import read_interfaces

# ROS 2 gives a struct without fields this placeholder member (rosidl's convention), so it serialises as
# one uint8 on the wire; we must do the same to be byte-compatible.
EMPTY_STRUCT_FIELD = "uint8 structure_needs_at_least_one_member"

_SRV_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)
# ros2idl definitions (MCAP schemas, rosbag2's message_definitions table): each type after a line of 80 "="
# and a line "IDL: pkg/msg/Type"; ros2msg ones name dependencies the same way with "MSG: pkg/Type".
_DEFINITION_SEPARATOR = "=" * 80 + "\n"
_PREPROCESSOR = re.compile(r"^[ \t]*#.*$", re.MULTILINE)


_CONSTANT = re.compile(r"^\S+\s+[A-Za-z_]\w*\s*=")


def _has_fields(text: str) -> bool:
    """True when the definition declares at least one field (constants do not count)."""
    for line in text.splitlines():
        body = line.split("#", 1)[0].strip()
        if body and not _CONSTANT.match(body):
            return True
    return False


def _with_placeholder(text: str) -> str:
    return text if _has_fields(text) else f"{text.rstrip()}\n{EMPTY_STRUCT_FIELD}\n"


def split_service(text: str) -> tuple[str, str]:
    """Split a .srv definition into its request and response message texts."""
    parts = _SRV_SEPARATOR.split(text)
    if len(parts) != 2:
        raise ValueError("a .srv definition needs exactly one '---' line between request and response")
    return _with_placeholder(parts[0]), _with_placeholder(parts[1])


def _service_half(text: str, typename: str) -> dict[str, object]:
    """Parse one half of a service under its ROS name ("pkg/srv/Name_Request").

    rosbags' parser files every type under "pkg/msg/"; services keep their own namespace in ROS 2.
    """
    parsed = get_types_from_msg(text, typename)
    package, _, leaf = typename.split("/")
    return {typename if key == f"{package}/srv/msg/{leaf}" else key: value for key, value in parsed.items()}


def build_typestore(root: Path | None = None) -> Typestore:
    """A Humble typestore with every message of msg/ and both halves of every service of srv/."""
    store = get_typestore(Stores.ROS2_HUMBLE)
    types: dict[str, object] = {}
    for item in read_interfaces(root):
        if item.kind == "msg":
            types.update(get_types_from_msg(_with_placeholder(item.text), item.typename))
        else:
            request, response = split_service(item.text)
            for half, text in (("Request", request), ("Response", response)):
                types.update(_service_half(text, f"{item.typename}_{half}"))
    store.register(types)  # type: ignore[arg-type]
    return store


def types_from_definition(typename: str, encoding: str, text: str) -> dict[str, object]:
    """The types (`typename` and its dependencies) of one embedded definition as ROS 2 records it: encoding
    "ros2msg" (the type's .msg text, then each dependency after a separator line and "MSG: pkg/Type") or
    "ros2idl" (each type after a separator line and "IDL: pkg/msg/Type"). `ValueError` says what is wrong."""
    try:
        if encoding == "ros2msg":
            return dict(get_types_from_msg(text, typename))
        if encoding == "ros2idl":
            types: dict[str, object] = {}
            parts = text.split(_DEFINITION_SEPARATOR)
            for part in parts if len(parts) > 1 else [f"IDL: {typename}\n{text}"]:
                head, _, body = part.partition("\n")
                if head.startswith("IDL: "):  # preprocessor lines (#include) name files, not types: dropped
                    types.update(get_types_from_idl(_PREPROCESSOR.sub("", body)))
            return types
    except Exception as exc:  # the parsers raise several kinds; callers get one
        raise ValueError(f"{encoding} definition of {typename} does not parse ({exc})") from exc
    raise ValueError(f"definition of {typename} has encoding {encoding!r} (only ros2msg or ros2idl)")


def typestore_with(types: dict[str, object], base: Typestore) -> Typestore:
    """A new typestore with `types` (a bag's own definitions: they describe its bytes, so they win) and every type
    of `base` that `types` does not define."""
    store = get_typestore(Stores.EMPTY)
    store.register(types)  # type: ignore[arg-type]
    store.register({name: fields for name, fields in base.fielddefs.items() if name not in types})
    return store
