"""What `ZenohBus.create_*` return: a handle that undeclares its Zenoh entities (and graph token) exactly once, and
the publisher of one topic's CDR bytes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

_log = logging.getLogger(__name__)


class Declared:
    """Closes Zenoh entities (an entity and its graph token) exactly once, then tells the bus (`forget`)."""

    def __init__(self, forget: Callable[[Declared], None], *entities: Any) -> None:
        self._forget = forget
        self._entities = list(entities)
        self._closing = threading.Lock()  # two threads closing one handle: one undeclares, the other finds none

    def close(self) -> None:
        with self._closing:
            entities, self._entities = self._entities, []
        for entity in entities:
            try:
                entity.undeclare()
            except zenoh.ZError as exc:  # already gone with the session
                _log.debug("undeclare failed: %s", exc)
        self._forget(self)


class ZenohPublisher(Declared):
    """Publishes raw CDR bytes on one topic."""

    def __init__(self, forget: Callable[[Declared], None], topic: str, publisher: Any, token: Any) -> None:
        super().__init__(forget, publisher, token)
        self.topic = topic
        self._publisher = publisher
        self._put = publisher.put

    def publish(self, payload: bytes) -> None:
        self._put(payload)

    def wait_for_subscribers(self, timeout_s: float) -> bool:
        """Wait until at least one subscriber matches (plain publishers only); False at the deadline."""
        status = getattr(self._publisher, "matching_status", None)
        if status is None:
            return True  # latched publishers serve late joiners from their cache anyway
        deadline = time.monotonic() + timeout_s
        while not self._publisher.matching_status.matching:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True
