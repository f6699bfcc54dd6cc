"""One Foxglove channel per topic, fed with the topic's CDR bytes as they arrive.

The bus calls `TopicChannel.forward` on its own thread (under its callback lock); the call only hands the
bytes to the SDK, which queues them per client and drops the oldest when a client falls behind, so it never
waits on the network.
"""

from __future__ import annotations

import time

import foxglove

from user.bus.base import Bus, Handle
from user.interfaces.codec import Codec

SCHEMA_ENCODING = "ros2msg"  # the type's .msg text, then each dependency after a `====` line and `MSG: pkg/Type`
MESSAGE_ENCODING = "cdr"  # ROS 2's wire format, 4-byte encapsulation header first


def ros2msg_schema(codec: Codec, typename: str) -> foxglove.Schema:
    """The Foxglove schema of `typename`: the same ros2msg text the buffer's MCAP segments carry."""
    name = codec.resolve(typename)
    return foxglove.Schema(name=name, encoding=SCHEMA_ENCODING, data=codec.definition(name).encode())


class TopicChannel:
    """A topic's Foxglove channel and the bus subscription that feeds it."""

    def __init__(self, context: foxglove.Context, bus: Bus, codec: Codec, topic: str, typename: str) -> None:
        self.topic = topic
        self.typename = codec.resolve(typename)
        self.forwarded = 0
        self._channel = foxglove.Channel(
            topic, schema=ros2msg_schema(codec, self.typename), message_encoding=MESSAGE_ENCODING, context=context
        )
        self._log = self._channel.log
        try:
            self._subscription: Handle | None = bus.create_subscription(topic, self.typename, self.forward)
        except Exception:
            self._channel.close()
            raise

    def forward(self, payload: bytes) -> None:
        """One sample's bytes, unchanged, stamped with their arrival time."""
        self._log(payload, log_time=time.time_ns())
        self.forwarded += 1

    def close(self) -> None:
        """Stop the subscription, then unadvertise the channel. Safe to call twice."""
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            subscription.close()
            self._channel.close()
