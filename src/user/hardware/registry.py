"""`Registry`: the resources announced on the network, with their health, kept up to date.

It follows the liveliness tokens under `@user/hw`: when a token appears it subscribes to that
resource's latched descriptor topic; when the token vanishes (the announcer closed it, or its process
died and the network noticed) the resource is marked lost and leaves `resources()`. A dead process is
noticed as soon as its connection drops (a killed process: well under a second); a frozen host or a cut
cable only when the Zenoh session lease expires (`transport/link/tx/lease`, 10 s by default).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from user.bus.base import LATCHED, Handle
from user.hardware.descriptor import MSG_TYPE, ResourceDescriptor, from_msg
from user.hardware.errors import InvalidDescriptorError, ResourcesNotFoundError
from user.hardware.keys import TOKEN_PREFIX, descriptor_topic, parse_token_key
from user.runtime.node import Node

Health = Literal["alive", "lost"]

DEFAULT_KEEP_LOST_S = 600.0  # how long a lost resource stays listed under `include_lost`

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResourceStatus:
    """A resource as the registry sees it."""

    descriptor: ResourceDescriptor
    health: Health  # "alive": its token is alive; "lost": its token vanished
    since: float  # wall-clock time (time.time()) when this registry saw it reach this health
    last_seen: float  # wall-clock time of the last sign of life (alive: now, the token is held by a live session)

    @property
    def resource_id(self) -> str:
        return self.descriptor.resource_id

    @property
    def kind(self) -> str:
        return self.descriptor.kind


@dataclass(frozen=True)
class Pending:
    """A resource whose token is alive but whose descriptor has not arrived (yet)."""

    kind: str
    resource_id: str
    since: float  # wall-clock time the token appeared


class _Entry:
    """Mutable per-resource state; only touched with the registry lock held."""

    def __init__(self, kind: str, now: float) -> None:
        self.kind = kind
        self.descriptor: ResourceDescriptor | None = None
        self.alive = True
        self.since = now
        self.subscription: Handle | None = None

    def status(self, now: float) -> ResourceStatus | None:
        """The public view; None while no descriptor has arrived."""
        if self.descriptor is None:
            return None
        return ResourceStatus(
            descriptor=self.descriptor,
            health="alive" if self.alive else "lost",
            since=self.since,
            last_seen=now if self.alive else self.since,
        )


class Registry:
    """Discovers resources through `node`'s bus. Thread-safe: read it from any thread."""

    def __init__(self, node: Node, keep_lost_s: float = DEFAULT_KEEP_LOST_S) -> None:
        self._node = node
        self._keep_lost_s = keep_lost_s
        self._changed = threading.Condition()  # guards the table; notified on every change
        self._entries: dict[str, _Entry] = {}
        self._closed = False
        self._watch = node.bus.watch_tokens(TOKEN_PREFIX, self._on_token)

    # ---- queries -------------------------------------------------------------------------------

    def resources(self, kind: str | None = None, include_lost: bool = False) -> list[ResourceStatus]:
        """Resources with a descriptor, sorted by id: alive ones, and recently lost ones if asked."""
        now = time.time()
        with self._changed:
            self._prune(now)
            found = [entry.status(now) for entry in self._entries.values() if entry.alive or include_lost]
        return sorted(
            (s for s in found if s is not None and (kind is None or s.kind == kind)), key=lambda s: s.resource_id
        )

    def descriptors(self, kind: str | None = None) -> list[ResourceDescriptor]:
        """Descriptors of the alive resources (what the scheduler places on)."""
        return [status.descriptor for status in self.resources(kind)]

    def pending(self) -> list[Pending]:
        """Resources whose token is alive but whose descriptor has not arrived."""
        with self._changed:
            return sorted(
                (
                    Pending(kind=e.kind, resource_id=rid, since=e.since)
                    for rid, e in self._entries.items()
                    if e.alive and e.descriptor is None
                ),
                key=lambda p: p.resource_id,
            )

    def wait_for(self, resource_ids: Iterable[str], timeout_s: float) -> list[ResourceStatus]:
        """Wait until every id is alive with a descriptor; `ResourcesNotFoundError` names those still missing."""
        wanted = sorted(set(resource_ids))
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                now = time.time()
                statuses = {rid: self._ready(rid, now) for rid in wanted}
                missing = [rid for rid, status in statuses.items() if status is None]
                if not missing:
                    return [status for status in statuses.values() if status is not None]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ResourcesNotFoundError(missing, timeout_s)
                self._changed.wait(remaining)

    def wait_settled(self, timeout_s: float) -> bool:
        """Wait until every alive token has its descriptor (nothing `pending()`); False at the deadline."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while any(e.alive and e.descriptor is None for e in self._entries.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    def close(self) -> None:
        """Stop watching and drop every subscription. Safe to call twice."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            subscriptions = [e.subscription for e in self._entries.values() if e.subscription is not None]
            for entry in self._entries.values():
                entry.subscription = None
        self._watch.close()
        for subscription in subscriptions:
            subscription.close()

    # ---- bus callbacks -------------------------------------------------------------------------

    def _on_token(self, key: str, alive: bool) -> None:
        name = parse_token_key(key)
        if name is None:
            _log.debug("ignoring token %s: not a resource token", key)
            return
        if alive:
            self._token_appeared(name.kind, name.resource_id)
        else:
            self._token_vanished(name.resource_id)

    def _token_appeared(self, kind: str, resource_id: str) -> None:
        try:
            topic = descriptor_topic(resource_id)
        except InvalidDescriptorError as exc:
            _log.warning("ignoring resource token %s/%s: %s", kind, resource_id, exc)
            return
        with self._changed:
            if self._closed:
                return
            entry = self._entries.get(resource_id)
            if entry is not None and entry.alive:
                return  # a repeated announcement of a token we already follow
            old = entry.subscription if entry is not None else None
            self._entries[resource_id] = _Entry(kind, time.time())
            self._changed.notify_all()
        if old is not None:
            old.close()
        _log.debug("resource %s %r appeared; subscribing to %s", kind, resource_id, topic)
        subscription = self._node.create_subscription(
            topic, MSG_TYPE, lambda msg: self._on_descriptor(resource_id, msg), LATCHED
        )
        with self._changed:
            entry = self._entries.get(resource_id)
            kept = entry is not None and entry.alive and entry.subscription is None and not self._closed
            if entry is not None and kept:
                entry.subscription = subscription
        if not kept:  # the token vanished (or the registry closed) meanwhile
            subscription.close()

    def _token_vanished(self, resource_id: str) -> None:
        now = time.time()
        with self._changed:
            entry = self._entries.get(resource_id)
            if entry is None or not entry.alive:
                return
            subscription, entry.subscription = entry.subscription, None
            described = entry.descriptor is not None
            if described:
                entry.alive = False
                entry.since = now
            else:
                del self._entries[resource_id]  # never described: nothing to remember
            self._changed.notify_all()
        if subscription is not None:
            subscription.close()
        if described:
            _log.warning("resource %s %r is lost (its announcer is gone)", entry.kind, resource_id)

    def _on_descriptor(self, resource_id: str, msg: Any) -> None:
        try:
            descriptor = from_msg(msg)
        except InvalidDescriptorError as exc:
            _log.error("dropped the descriptor of resource %r: %s", resource_id, exc)
            return
        with self._changed:
            entry = self._entries.get(resource_id)
            if entry is None or not entry.alive:
                return  # a late sample from an announcer that is already gone
            if descriptor.resource_id != resource_id or descriptor.kind != entry.kind:
                _log.error(
                    "dropped a descriptor on %s: it describes %s %r, but the token announces %s %r",
                    descriptor_topic(resource_id),
                    descriptor.kind,
                    descriptor.resource_id,
                    entry.kind,
                    resource_id,
                )
                return
            if descriptor == entry.descriptor:
                return  # the same latched sample again (history and live delivery may overlap)
            change = "added" if entry.descriptor is None else "updated"
            entry.descriptor = descriptor
            self._changed.notify_all()
        _log.info(
            "resource %s %r %s (%s at %r)", descriptor.kind, resource_id, change, descriptor.model, descriptor.site
        )

    # ---- helpers -------------------------------------------------------------------------------

    def _ready(self, resource_id: str, now: float) -> ResourceStatus | None:
        entry = self._entries.get(resource_id)
        return entry.status(now) if entry is not None and entry.alive else None

    def _prune(self, now: float) -> None:
        expired = [rid for rid, e in self._entries.items() if not e.alive and now - e.since > self._keep_lost_s]
        for rid in expired:
            del self._entries[rid]
