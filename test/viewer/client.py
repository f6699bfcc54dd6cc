"""A Foxglove WebSocket client written from the protocol, for the viewer's tests.

foxglove-sdk 0.30's server speaks the protocol under the subprotocol name "foxglove.sdk.v1" and refuses a client
that offers only the older name "foxglove.websocket.v1"; the client offers both, as Foxglove's app does.

The server sends JSON text frames (`serverInfo`, `advertise`, `unadvertise`, ...) and binary message frames:
opcode 0x01, subscription id (u32 LE), log time in ns (u64 LE), then the payload. The client subscribes with
`{"op": "subscribe", "subscriptions": [{"id": ..., "channelId": ...}]}`. Every wait has a deadline.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

SUBPROTOCOLS = [Subprotocol("foxglove.sdk.v1"), Subprotocol("foxglove.websocket.v1")]
OP_MESSAGE_DATA = 0x01
_HEADER = struct.Struct("<BIQ")


@dataclass(frozen=True)
class Received:
    """One binary message frame."""

    subscription: int
    log_time_ns: int
    payload: bytes


class FoxgloveClient:
    """Connects, records what the server advertises and the messages of the channels it subscribed to."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.ws: ClientConnection = connect(
            url, subprotocols=SUBPROTOCOLS, open_timeout=timeout_s, max_size=None, proxy=None, legacy=True
        )
        self.server_info: dict[str, Any] | None = None
        self.channels: dict[int, dict[str, Any]] = {}  # advertised and not unadvertised, by channel id
        self.messages: list[Received] = []
        self.subscribed: dict[int, int] = {}  # subscription id -> channel id
        self.text_ops: list[str] = []
        self.subprotocol = self.ws.subprotocol

    def close(self) -> None:
        self.ws.close()

    def channel(self, topic: str) -> dict[str, Any] | None:
        return next((c for c in self.channels.values() if c["topic"] == topic), None)

    def subscribe(self, channel_id: int) -> int:
        sub_id = len(self.subscribed) + 1
        self.subscribed[sub_id] = channel_id
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sub_id, "channelId": channel_id}]}))
        return sub_id

    def messages_of(self, sub_id: int) -> list[Received]:
        return [m for m in self.messages if m.subscription == sub_id]

    def pump_until(self, done: Callable[[], bool], timeout_s: float) -> bool:
        """Read frames until `done()` or the deadline; returns `done()`."""
        deadline = time.monotonic() + timeout_s
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                frame = self.ws.recv(timeout=min(left, 0.5))
            except TimeoutError:
                continue
            self._take(frame)
        return True

    def _take(self, frame: str | bytes) -> None:
        if isinstance(frame, bytes):
            opcode, sub_id, log_time = _HEADER.unpack_from(frame)
            if opcode == OP_MESSAGE_DATA:
                self.messages.append(Received(sub_id, log_time, frame[_HEADER.size :]))
            return
        msg = json.loads(frame)
        self.text_ops.append(msg["op"])
        if msg["op"] == "serverInfo":
            self.server_info = msg
        elif msg["op"] == "advertise":
            self.channels.update({c["id"]: c for c in msg["channels"]})
        elif msg["op"] == "unadvertise":
            for channel_id in msg["channelIds"]:
                self.channels.pop(channel_id, None)
