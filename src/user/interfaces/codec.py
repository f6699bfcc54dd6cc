"""The one CDR codec: bytes exactly as ROS 2 puts them on the wire (4-byte encapsulation header first).

Every node, the Zenoh runtime, the rclpy adapter and the buffer encode and decode through this.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from rosbags.typesys.store import Typestore

from user.interfaces.typestore import build_typestore

_HEADER_SIZE = 4
# what `Codec.encode` writes first: plain CDR in this machine's byte order (little endian: x86, ARM), no options
ENCODED_HEADER = b"\x00\x01\x00\x00" if sys.byteorder == "little" else b"\x00\x00\x00\x00"
_KNOWN_REPRESENTATIONS = {b"\x00\x00", b"\x00\x01"}  # CDR_BE, CDR_LE (plain CDR, as ROS 2 uses)


class UnknownTypeError(KeyError):
    """A message type name is not in the typestore."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown message type"


class DecodeError(ValueError):
    """Bytes could not be decoded as the given message type."""

    def __init__(self, typename: str, reason: str) -> None:
        super().__init__(f"cannot decode {typename}: {reason}")
        self.typename = typename
        self.reason = reason


class EncodeError(ValueError):
    """A message could not be encoded (a field has the wrong type or value)."""


@functools.lru_cache(maxsize=1024)  # a handful of names, looked up for every message field built or read
def normalize_typename(name: str) -> str:
    """Accept "pkg/Type", "pkg/msg/Type" and "pkg::msg::Type" (as ROS tools do); return "pkg/msg/Type"."""
    parts = [p for p in name.replace("::", "/").split("/") if p]
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    return "/".join(parts)


class Codec:
    """Encode and decode ROS 2 messages as CDR bytes with a `rosbags` typestore."""

    def __init__(self, typestore: Typestore) -> None:
        self.typestore = typestore

    def resolve(self, typename: str) -> str:
        """The canonical "pkg/msg/Type" name, or `UnknownTypeError`."""
        name = normalize_typename(typename)
        if name not in self.typestore.types:
            raise UnknownTypeError(f"unknown message type {typename!r}")
        return name

    def has_type(self, typename: str) -> bool:
        return normalize_typename(typename) in self.typestore.types

    def msg_class(self, typename: str) -> Any:
        """The dataclass that represents messages of `typename`."""
        return self.typestore.types[self.resolve(typename)]

    def encode(self, msg: Any, typename: str | None = None) -> bytes:
        """CDR bytes (little endian, with encapsulation header) of `msg`."""
        name = self.resolve(typename or msg.__msgtype__)
        try:
            return bytes(self.typestore.serialize_cdr(msg, name))
        except Exception as exc:  # rosbags raises several kinds; callers get one typed error
            raise EncodeError(f"cannot encode {name}: {exc}") from exc

    def encoded_size(self, msg: Any, typename: str | None = None) -> int:
        """How many bytes `encode(msg)` gives (header included), without encoding."""
        name = self.resolve(typename or msg.__msgtype__)
        return _HEADER_SIZE + int(self.typestore.get_msgdef(name).getsize_cdr(0, msg, self.typestore))

    def decode(self, data: bytes | bytearray | memoryview, typename: str) -> Any:
        """Decode CDR bytes into a message of `typename`; `DecodeError` says what was wrong."""
        name = self.resolve(typename)
        raw = bytes(data) if not isinstance(data, bytes) else data
        if len(raw) < _HEADER_SIZE:
            raise DecodeError(name, f"payload of {len(raw)} bytes is shorter than the CDR header")
        if raw[:2] not in _KNOWN_REPRESENTATIONS:
            raise DecodeError(name, f"unknown CDR encapsulation {raw[:2].hex()}")
        try:
            return self.typestore.deserialize_cdr(raw, name)
        except Exception as exc:  # malformed payloads raise many kinds of errors inside rosbags
            raise DecodeError(name, str(exc) or type(exc).__name__) from exc

    def definition(self, typename: str) -> str:
        """The full ros2msg definition text (dependencies appended), as MCAP schemas carry it."""
        text, _ = self.typestore.generate_msgdef(self.resolve(typename), ros_version=2)
        return str(text)


@functools.lru_cache(maxsize=1)
def default_codec() -> Codec:
    """The process-wide codec over the package's interfaces and Humble's standard types."""
    return Codec(build_typestore())
