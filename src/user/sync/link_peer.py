"""`LinkPeer`: the sender's thread for one joined rollout of a weight link (`user.sync.weight_link`).

It waits for a version newer than the one it sent last (`Newest`, shared by all peers) for at most the heartbeat,
then sends that version, or pings. Every send and every reply it waits for has the link's deadline; a miss, a
broken connection or a reply that is not one ends the thread and the peer is dropped (one log line, by the sender).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import torch

from user.policies.base import FlatWeights
from user.sync import link_wire as wire
from user.sync.link_wire import LinkError

if TYPE_CHECKING:
    from user.sync.weight_link import WeightLinkSender


class Newest:
    """The newest version offered, and whether the link is closing; peers wait on it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._weights: FlatWeights | None = None
        self.stopped = False

    def put(self, weights: FlatWeights) -> None:
        with self._cond:
            self._weights = weights
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self.stopped = True
            self._cond.notify_all()

    def after(self, version: int, timeout_s: float) -> FlatWeights | None:
        """The newest version when it is newer than `version`, waiting at most `timeout_s`; else None."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self.stopped and (self._weights is None or self._weights.version <= version):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return None if self.stopped else self._weights


class LinkPeer:
    """Serves one rollout (rank 1 of `group`) until the link closes or the rollout misses a deadline."""

    def __init__(self, sender: WeightLinkSender, group: Any, generation: int, name: str, newest: Newest) -> None:
        self.sender = sender
        self.group = group
        self.generation = generation
        self.name = name  # what the rollout called itself when it joined
        self.acked = 0  # the version the rollout acts with, as it last replied
        self.sent = 0  # the newest version sent (applied, refused or stale)
        self._newest = newest
        self._timeout_s = sender.config.timeout_s
        self._reply = torch.empty(3, dtype=torch.int64, device=sender.device)
        self._thread = threading.Thread(target=self._run, name=f"weight-link-{generation}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def _run(self) -> None:
        reason: str | None = None
        try:
            self._exchange(wire.PING)  # the rollout's version now
            while True:
                weights = self._newest.after(self.sent, self.sender.config.heartbeat_s)
                if self._newest.stopped:
                    self._header(wire.BYE, 0)
                    break
                if weights is None:
                    self._exchange(wire.PING)
                else:
                    self._send_version(weights)
        except (RuntimeError, LinkError) as exc:  # a missed deadline, a closed connection, a reply that is not one
            reason = wire.first_line(exc)
        finally:
            wire.close_group(self.group)
            self.sender.forget(self, reason)

    def _header(self, kind: int, version: int) -> None:
        s = self.sender
        head = wire.Header(kind, version, s.numel, s.dtype_code, s.spec_hash)
        wire.send(self.group, head.tensor(s.device), wire.RECEIVER, wire.TAG_HEADER, self._timeout_s)

    def _await_reply(self) -> int:
        wire.recv(self.group, self._reply, wire.RECEIVER, wire.TAG_REPLY, self._timeout_s)
        code, self.acked = wire.checked_reply(self._reply)
        return code

    def _exchange(self, kind: int) -> None:
        self._header(kind, 0)
        if self._await_reply() != wire.ALIVE:
            raise LinkError("weight link: the rollout did not answer a ping as one")

    def _send_version(self, weights: FlatWeights) -> None:
        s, version = self.sender, weights.version
        data = weights.data
        code = wire.dtype_code(data.dtype)
        head = wire.Header(wire.VERSION, version, data.numel(), code, wire.spec_hash(weights.spec))
        wire.send(self.group, head.tensor(s.device), wire.RECEIVER, wire.TAG_HEADER, self._timeout_s)
        code = self._await_reply()
        self.sent = version
        if code == wire.REFUSED:
            s.log.error(
                "weight link: rollout %s refused version %d (see its log); it keeps version %d",
                self.name,
                version,
                self.acked,
            )
            return
        if code == wire.STALE:
            return  # it acts with this version or a newer one already
        if code != wire.READY:
            raise LinkError(f"weight link: the rollout answered a version header with code {code}")
        data = data if data.device == s.device else data.to(s.device)
        wire.send(self.group, data.contiguous(), wire.RECEIVER, wire.TAG_DATA, self._timeout_s)
        code = self._await_reply()
        if code == wire.REFUSED:
            s.log.error(
                "weight link: rollout %s refused the values of version %d (see its log); it keeps version %d",
                self.name,
                version,
                self.acked,
            )
            return
        if code != wire.APPLIED or self.acked != version:
            raise LinkError(f"weight link: the rollout did not confirm version {version} (it acts with {self.acked})")
