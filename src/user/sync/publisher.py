"""`WeightPublisher`: the learner side of weight synchronisation.

Every `every_k_updates` learner updates (or on demand) the policy's actor weights are cast to the wire
dtype, stamped with the next version and published as WeightChunk messages on one RELIABLE topic, each
naming the publisher (`publisher`, the learner id) in its header.frame_id. Weights that are not all finite
are never published.

Late joiners: the topic is LATCHED (transient local) with a history depth of exactly one version's chunk
count. A policy's payload size is fixed by its WeightSpec and the wire dtype, so every version has the
same number of chunks and the publisher's cache always holds the newest complete version. This needs no
extra request service, works unchanged through zenoh-bridge-ros2dds (TRANSIENT_LOCAL with that depth),
and a robot site that starts or reconnects gets the current weights without the learner doing anything.
A late joiner that arrives mid-publication may see the tail of the previous version first; the
`Assembler` drops that incomplete older version as soon as the newer one's chunks arrive.

The cache alone has one gap: a subscriber that queried the (still empty) cache when the publisher
appeared, and whose live chunks were dropped because routes were not yet set up, would wait for the
next version. So the publisher also answers resend requests (std_msgs/String carrying the policy id on
`<topic>/resend`, see `resend_topic`) by re-publishing the newest version, at most once per
`min_resend_interval_s`; subscribers ask while they have no weights yet or a version stalls incomplete.

Each version is copied once, as one flat buffer (`FlatWeightCopier`: on a GPU, a device snapshot then a host copy on
a low-priority side stream), and that copy feeds both the Bus and, when given, a `WeightLinkSender`
(`user.sync.weight_link`) that hands it to co-located rollouts over torch.distributed on its own threads.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import torch

from user.bus.base import QoS
from user.interfaces.validate import InvalidMessageError, check_weights
from user.policies.base import FlatWeights, Policy
from user.runtime.node import Node, TypedPublisher
from user.sync.chunking import (
    DEFAULT_CHUNK_SIZE,
    MSG_TYPE,
    Chunk,
    chunk_count,
    chunk_to_msg,
    dtype_name,
    payload_size,
    split_weights,
)
from user.sync.delta import DeltaEncoder
from user.sync.errors import PayloadError
from user.sync.flat_weights import FlatWeightCopier
from user.sync.weight_link import WeightLinkSender

_log = logging.getLogger(__name__)

REQUEST_TYPE = "std_msgs/msg/String"  # a resend request: data = policy id


def resend_topic(topic: str) -> str:
    """Where subscribers of `topic` ask for the newest version again."""
    return f"{topic.rstrip('/')}/resend"


class WeightPublisher:
    """Publishes `policy`'s actor weights as versioned chunks on `topic`."""

    def __init__(
        self,
        node: Node,
        policy: Policy,
        *,
        policy_id: str,
        topic: str,
        every_k_updates: int | None = 1,
        dtype: torch.dtype | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        min_resend_interval_s: float = 0.5,
        publisher: str = "",
        delta: bool = False,
        keyframe_every: int = 20,
        link: WeightLinkSender | None = None,
    ) -> None:
        if every_k_updates is not None and every_k_updates < 1:
            raise ValueError(f"every_k_updates must be at least 1, got {every_k_updates}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1 byte, got {chunk_size}")
        self.policy = policy
        self.policy_id = policy_id
        self.publisher = publisher  # named in every chunk (header.frame_id): subscribers may accept only this one
        self.every_k_updates = every_k_updates
        self.chunk_size = chunk_size
        self.dtype = dtype if dtype is not None else policy.get_weights().data.dtype
        dtype_name(self.dtype)  # fail now, not at the first publication, on an unsupported dtype
        self.chunks_per_version = chunk_count(payload_size(policy.weight_spec, self.dtype), chunk_size)
        self._node = node
        self._publisher: TypedPublisher = node.create_publisher(
            topic, MSG_TYPE, QoS(reliable=True, latched=True, depth=self.chunks_per_version)
        )
        self._lock = threading.Lock()
        self._updates = 0
        self._latest: list[Chunk] = []
        self._latest_weights: FlatWeights | None = None
        # delta: compressed, delta-coded payloads (user.sync.delta); a resend is a keyframe
        self._encoder = DeltaEncoder(keyframe_every) if delta else None
        self.link = link  # co-located rollouts get every version over torch.distributed too (closed with this)
        self._copier: FlatWeightCopier | None = None  # made at the first publication (the policy is on its device)
        self._last_resend = -float("inf")
        self.min_resend_interval_s = min_resend_interval_s
        self.resends = 0  # times the newest version was re-published on request
        self._requests = node.create_subscription(resend_topic(topic), REQUEST_TYPE, self._on_request)
        self.version = policy.version  # newest version published (the policy's own until the first one)

    def after_update(self) -> int | None:
        """Call once per learner update; publishes on every K-th (never when K is None: only `publish_now`).
        Returns the version published, if any."""
        with self._lock:
            self._updates += 1
            due = self.every_k_updates is not None and self._updates % self.every_k_updates == 0
        return self.publish_now() if due else None

    def publish_now(self) -> int:
        """Publish the current weights as the next version now; returns that version.

        Weights with a value that is not finite in the wire dtype (a diverged update, or a value beyond
        float16's range) are not published: `PayloadError` naming the parameter, and the version stays (the
        newest published version is still the one late joiners and resend requests get)."""
        with self._lock:
            version = max(self.version, self.policy.version) + 1
            weights = self._copy()
            spec = weights.spec
            try:
                check_weights(weights.data, spec.names, spec.shapes)
            except InvalidMessageError as exc:
                raise PayloadError(
                    f"weights of policy {self.policy_id!r} version {version} not published: {exc}"
                ) from exc
            weights = FlatWeights(weights.data, spec, version)
            chunks = split_weights(weights, self.policy_id, self.chunk_size, self.publisher, encoder=self._encoder)
            self._send(chunks)
            if self.link is not None:
                self.link.offer(weights)
            self._latest_weights = weights
            self.policy.version = version  # the learner's policy carries the version it published last
            self._latest = chunks
            self.version = version
        _log.info(
            "published weights of policy %r version %d (%d chunks, %d bytes, %s)",
            self.policy_id,
            version,
            len(chunks),
            chunks[0].total_bytes,
            chunks[0].dtype,
        )
        return version

    def close(self) -> None:
        self._requests.close()
        self._publisher.close()
        if self.link is not None:
            self.link.close()

    def _copy(self) -> FlatWeights:
        """The policy's weights in the wire dtype, copied once from its flat buffer (a fresh tensor each time: the
        Bus's resends and the link's threads may still use the previous one)."""
        if self._copier is None or not self._copier.current():
            self._copier = FlatWeightCopier(self.policy, self.dtype)
        return self._copier.copy()

    def _send(self, chunks: list[Chunk]) -> None:
        stamp = self._node.now_ns()
        for chunk in chunks:
            self._publisher.publish(chunk_to_msg(chunk, self._node.codec, stamp))

    def _on_request(self, msg: Any) -> None:
        if msg.data != self.policy_id:
            return
        with self._lock:
            now = time.monotonic()
            if not self._latest or now - self._last_resend < self.min_resend_interval_s:
                return
            self._last_resend = now
            if self._encoder is not None and self._latest_weights is not None:  # a late joiner lacks the base
                self._latest = split_weights(
                    self._latest_weights,
                    self.policy_id,
                    self.chunk_size,
                    self.publisher,
                    encoder=self._encoder,
                    keyframe=True,
                )
            self._send(self._latest)
            self.resends += 1
        _log.info("re-published weights of policy %r version %d on request", self.policy_id, self.version)
