"""`WeightSubscriber`: the robot-site side of weight synchronisation.

Chunks are assembled on the bus thread and a complete, verified version is applied to the policy at once; which
version each robot acts with, and when it switches (at its episode boundary by default), is the rollout's choice
(`user.acting.pinning`). A version is taken only whole, checksummed, of the local policy's layout, with every
value finite and, when `publisher` is set, from that publisher (see `user.sync.assembler`). Rejected chunks and
versions are counted, logged once per cause (rate-limited, see `user.interfaces.refusals`) and never applied; the
policy keeps acting with the weights it has, and a rejected version, whatever its number, holds no later version
back.

Every `resend_period_s` the subscriber asks the publisher to re-publish its newest version while it has
received none yet, or while a version has stalled incomplete for that long (see `user.sync.publisher`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from user.bus.base import Handle, QoS
from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError
from user.policies.base import FlatWeights, Policy, PolicyError
from user.runtime.node import Node
from user.sync.assembler import Assembler
from user.sync.chunking import DEFAULT_CHUNK_SIZE, DTYPES, MSG_TYPE, chunk_count, chunk_from_msg, payload_size
from user.sync.delta import BaseMissingError
from user.sync.errors import ChunkError, WeightSyncError
from user.sync.in_use import WeightsInUse
from user.sync.publisher import REQUEST_TYPE, resend_topic

_log = logging.getLogger(__name__)


class WeightSubscriber(WeightsInUse):
    """Receives versions of `policy_id`'s weights on `topic` and applies them to `policy`.

    The history depth for late joining is one version's chunk count at the widest dtype (float64) and
    `chunk_size`, which covers any narrower dtype the publisher may send.
    """

    def __init__(
        self,
        node: Node,
        policy: Policy,
        *,
        policy_id: str,
        topic: str,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        resend_period_s: float = 1.0,
        publisher: str = "",
    ) -> None:
        super().__init__(policy)
        self.policy_id = policy_id
        self.rejected = 0  # chunks or versions rejected (bad chunk, checksum, layout, not finite, publisher)
        self.received_versions = 0  # complete, verified versions
        self._assembler = Assembler(policy_id, policy.weight_spec, publisher)
        self.refusals = Refusals(_log)
        self.resend_requests = 0  # times this subscriber asked for the newest version again
        self._last_chunk = time.monotonic()
        self._resend_period_s = resend_period_s
        self._request_msg = node.codec.msg_class(REQUEST_TYPE)(data=policy_id)
        widest = max(DTYPES.values(), key=lambda d: d.itemsize)
        depth = chunk_count(payload_size(policy.weight_spec, widest), chunk_size)
        self._handle: Handle = node.create_subscription(
            topic, MSG_TYPE, self._on_chunk, QoS(reliable=True, latched=True, depth=depth)
        )
        self._requests = node.create_publisher(resend_topic(topic), REQUEST_TYPE)
        self._timer = node.create_timer(resend_period_s, self._tick)

    def close(self) -> None:
        self._timer.close()
        self._handle.close()
        self._requests.close()

    # ---- bus thread -----------------------------------------------------------------------------

    def _tick(self) -> None:
        """Timer: ask for a resend while no version arrived yet or the pending one stalled."""
        with self._changed:
            stalled = self._assembler.pending_version is not None
        waiting = self.received_versions == 0 or stalled
        if waiting and time.monotonic() - self._last_chunk >= self._resend_period_s:
            self.resend_requests += 1
            _log.debug("asking for weights of policy %r again (stalled: %s)", self.policy_id, stalled)
            self._requests.publish(self._request_msg)

    def _on_chunk(self, msg: Any) -> None:
        if msg.policy_id != self.policy_id:
            return
        self._last_chunk = time.monotonic()
        with self._changed:
            try:
                weights = self._assembler.add(chunk_from_msg(msg))
            except BaseMissingError as exc:  # joined (or lost a version) amid deltas: ask for a keyframe now
                _log.info("policy %r: %s; asking for the newest version whole", self.policy_id, exc)
                self.resend_requests += 1
                self._requests.publish(self._request_msg)
                return
            except WeightSyncError as exc:
                self.rejected += 1
                self.refusals.refuse(_cause(exc), f"weights: {exc}", _level(exc))
                return
            if weights is None:
                return
            self.received_versions += 1
            _log.info("received weights of policy %r version %d", self.policy_id, weights.version)
            self._apply(weights)

    def _apply(self, weights: FlatWeights) -> None:
        """Load `weights` into the policy; the caller holds the lock. Weights the policy cannot take count as not
        received: the version in use stays, and a resend of theirs is assembled again."""
        try:
            self.policy.load_weights(weights)
        except PolicyError as exc:
            self.rejected += 1
            self._assembler.rewind(self.policy.version)
            self.refusals.refuse(
                "apply",
                f"weights: could not apply weights of policy {self.policy_id!r} version {weights.version}: {exc}",
            )
            return
        self._changed.notify_all()
        _log.info("policy %r now acts with weights version %d", self.policy_id, weights.version)


def _cause(exc: WeightSyncError) -> str:
    """The refusal's cause, for counting: what the checks of the weights named, else the kind of error."""
    if isinstance(exc.__cause__, InvalidMessageError):
        return exc.__cause__.cause
    if isinstance(exc, ChunkError) and exc.reason.startswith("published by"):
        return "weights publisher"
    return type(exc).__name__


def _level(exc: WeightSyncError) -> int:
    """Damage on the way (a lost or garbled chunk) is a warning; weights that are whole yet unusable an error."""
    return logging.ERROR if isinstance(exc.__cause__, InvalidMessageError) else logging.WARNING
