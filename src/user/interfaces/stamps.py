"""Time stamps: integer nanoseconds in the core, builtin_interfaces/Time on the wire."""

from __future__ import annotations

import time
from typing import Any

from user.interfaces.codec import Codec

_NS = 1_000_000_000


def now_ns() -> int:
    """Wall-clock time in nanoseconds since the epoch (what ROS 2's system clock gives)."""
    return time.time_ns()


def to_time(ns: int, codec: Codec) -> Any:
    """builtin_interfaces/msg/Time for `ns` nanoseconds."""
    return codec.msg_class("builtin_interfaces/msg/Time")(sec=ns // _NS, nanosec=ns % _NS)


def from_time(stamp: Any) -> int:
    """Nanoseconds of a builtin_interfaces/msg/Time."""
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def header(ns: int, frame_id: str, codec: Codec) -> Any:
    """std_msgs/msg/Header with the given stamp and frame."""
    return codec.msg_class("std_msgs/msg/Header")(stamp=to_time(ns, codec), frame_id=frame_id)
