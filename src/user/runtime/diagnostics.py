"""`/diagnostics` from every node (diagnostic_msgs/DiagnosticArray, the levels ROS 2's diagnostic tools use).

Each node says how it is in `Node.diagnostics()`: a list of `Status` (a name such as "franka_left: robot", a level,
a one-line message, key-value details). The runner publishes them every `USER_DIAGNOSTICS_PERIOD_S` seconds (1 s by
default; 0 turns it off) on both runtimes, so `user topic echo /diagnostics`, rviz, Foxglove and rqt's robot
monitor show a dead camera, a held or e-stopped robot, an idle learner or a filling disk without reading logs.
A node whose `diagnostics()` raises is reported as ERROR with the exception; it is never stopped by it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from user.bus.base import RELIABLE
from user.interfaces.stamps import header, now_ns

if TYPE_CHECKING:
    from user.runtime.node import Node

_log = logging.getLogger(__name__)

OK, WARN, ERROR, STALE = 0, 1, 2, 3  # diagnostic_msgs/DiagnosticStatus levels
LEVEL_NAMES = {OK: "OK", WARN: "WARN", ERROR: "ERROR", STALE: "STALE"}
TOPIC = "/diagnostics"
ENV_PERIOD = "USER_DIAGNOSTICS_PERIOD_S"
DEFAULT_PERIOD_S = 1.0


@dataclass(frozen=True)
class Status:
    """One component's state, as a DiagnosticStatus."""

    name: str  # "<node>: <component>", as diagnostic aggregators group them
    level: int  # OK, WARN, ERROR or STALE
    message: str  # one line: what is wrong, or what it is doing
    values: Mapping[str, Any] = field(default_factory=dict)  # details (numbers, names), sent as strings
    hardware_id: str = ""  # the device (robot id, camera name) where there is one

    def __post_init__(self) -> None:
        if self.level not in LEVEL_NAMES:
            raise ValueError(
                f"diagnostic level of {self.name!r} must be 0..3 (OK, WARN, ERROR, STALE), got {self.level}"
            )


def period_from_env(env: Mapping[str, str] | None = None) -> float:
    """The publication period (s) from `USER_DIAGNOSTICS_PERIOD_S`; 0 = off. A bad value is refused by name."""
    text = (os.environ if env is None else env).get(ENV_PERIOD, "")
    if not text:
        return DEFAULT_PERIOD_S
    try:
        period = float(text)
    except ValueError:
        raise ValueError(f"{ENV_PERIOD} must be a number of seconds, got {text!r}") from None
    if not period >= 0.0 or period == float("inf"):
        raise ValueError(f"{ENV_PERIOD} must be 0 (off) or a positive number of seconds, got {text!r}")
    return period


def to_message(statuses: list[Status], stamp_ns: int, codec: Any) -> Any:
    """A diagnostic_msgs/DiagnosticArray of `statuses`."""
    status, key_value = (
        codec.msg_class("diagnostic_msgs/msg/DiagnosticStatus"),
        codec.msg_class("diagnostic_msgs/msg/KeyValue"),
    )
    return codec.msg_class("diagnostic_msgs/msg/DiagnosticArray")(
        header=header(stamp_ns, "", codec),
        status=[
            status(
                level=s.level,
                name=s.name,
                message=s.message,
                hardware_id=s.hardware_id,
                values=[key_value(key=str(k), value=_text(v)) for k, v in s.values.items()],
            )
            for s in statuses
        ],
    )


def _text(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class DiagnosticsPublisher:
    """Publishes `node.diagnostics()` on `/diagnostics` every `period_s` from the bus's timer thread."""

    def __init__(self, node: Node, period_s: float, clock_ns: Callable[[], int] = now_ns) -> None:
        self.node, self._clock = node, clock_ns
        self._pub = node.create_publisher(TOPIC, "diagnostic_msgs/msg/DiagnosticArray", RELIABLE)
        self._lock = threading.Lock()
        self._closed = False
        self.published = 0
        self._timer = node.create_timer(period_s, self.publish)

    def statuses(self) -> list[Status]:
        """The node's statuses, or one ERROR naming why they could not be had."""
        try:
            return list(self.node.diagnostics())
        except Exception as exc:  # a diagnostics bug must not stop the node
            _log.exception("diagnostics of node %s failed", self.node.name)
            return [Status(f"{self.node.name}: node", ERROR, f"diagnostics failed: {type(exc).__name__}: {exc}")]

    def publish(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._pub.publish(to_message(self.statuses(), self._clock(), self.node.codec))
            self.published += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._timer.close()
