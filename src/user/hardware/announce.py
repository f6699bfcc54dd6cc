"""`Announcer`: make one resource known on the network until closed (or until the process dies).

The descriptor goes on a latched topic, so a registry started later still receives it; presence is a
liveliness token, which the network withdraws by itself when the announcing process goes away.
"""

from __future__ import annotations

import logging

from user.bus.base import LATCHED, Bus, Handle, RawPublisher
from user.hardware.descriptor import MSG_TYPE, ResourceDescriptor, to_msg
from user.hardware.keys import descriptor_topic, token_key
from user.interfaces.codec import Codec, default_codec
from user.runtime.node import Node

_log = logging.getLogger(__name__)


class Announcer:
    """Announces `descriptor` through a node (or a bare bus) until `close()`."""

    def __init__(self, node_or_bus: Node | Bus, descriptor: ResourceDescriptor) -> None:
        bus: Bus = node_or_bus.bus if isinstance(node_or_bus, Node) else node_or_bus
        codec: Codec = node_or_bus.codec if isinstance(node_or_bus, Node) else default_codec()
        self.descriptor = descriptor
        self.topic = descriptor_topic(descriptor.resource_id)
        self.token = token_key(descriptor.kind, descriptor.resource_id)
        self._publisher: RawPublisher | None = bus.create_publisher(self.topic, MSG_TYPE, LATCHED)
        self._publisher.publish(codec.encode(to_msg(descriptor, codec), MSG_TYPE))
        # The token last: whoever sees it can subscribe and find the descriptor already latched.
        self._token: Handle | None = bus.declare_token(self.token)
        _log.info(
            "announcing %s %r (%s) at site %r",
            descriptor.kind,
            descriptor.resource_id,
            descriptor.model or "unknown model",
            descriptor.site,
        )

    @property
    def closed(self) -> bool:
        return self._token is None and self._publisher is None

    def close(self) -> None:
        """Withdraw the token, then the descriptor. Safe to call twice."""
        token, self._token = self._token, None
        publisher, self._publisher = self._publisher, None
        if token is not None:
            token.close()
            _log.info("withdrew %s %r", self.descriptor.kind, self.descriptor.resource_id)
        if publisher is not None:
            publisher.close()
