"""`WeightLinkSender`: weights from the learner's process to co-located rollouts over torch.distributed.

When a rollout node runs on the learner's machine, versions need not go through the Bus: the learner listens on a
`TCPStore` of its own (`LinkServe.host`:`port`) and each rollout that joins gets a process group of two ranks with
it (`user.sync.link_wire`: gloo on CPU, NCCL when the policy is on a GPU), independent of any torchrun group the
learner runs in. Across sites the Bus path (`WeightPublisher`, optionally `weight_delta`) stays and keeps
publishing every version; the link is an addition for the rollouts that asked for it (`weights_from: link`).

Joining: a rollout reads the sender's `Offer` (policy id, layout hash, backend, deadlines) from the store, takes the
next generation number (`store.add`) and writes its join record; the sender's accept thread takes joins in turn and
builds that generation's group. A rollout that restarts simply joins again under a new generation; the old one was
dropped. Each joined rollout is served by its own thread (`LinkPeer`), so one slow or dead rollout never delays
another, nor training: `offer` only hands the newest version over. A peer sends the newest version when there is
one it has not sent, else a ping every `heartbeat_s`; every exchange has the deadline `timeout_s`, and a rollout
that misses it (killed, hung) is dropped with one log line.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import torch
from torch._C._distributed_c10d import TCPStore

from user.config.strict import setting
from user.policies.base import FlatWeights, Policy, WeightSpec
from user.sync import link_wire as wire
from user.sync.link_peer import LinkPeer, Newest
from user.sync.link_wire import LinkError

_log = logging.getLogger(__name__)

ACCEPT_WAIT_S = 3600.0  # the accept thread's wait for the next join; `close` ends it at once with a last record


@dataclass(frozen=True)
class LinkServe:
    """Learner side: where co-located rollouts join to receive weights over torch.distributed."""

    port: int = setting(0, "TCP port of the link's store; 0 = off (weights go only through the Bus)", min=0, max=65535)
    host: str = setting("127.0.0.1", "address to listen on (rollouts on this machine join at host:port)")
    backend: Literal["auto", "gloo", "nccl"] = setting(
        "auto",
        "auto: nccl (GPU to GPU) when the policy is on a GPU and the machine has more, else gloo (from the host copy); "
        "NCCL cannot join two processes on one GPU, so a rollout on the learner's own GPU needs gloo",
    )
    timeout_s: float = setting(
        10.0, "deadline of every join and exchange: a rollout that misses it is dropped (training goes on)", min=0.1
    )
    heartbeat_s: float = setting(
        1.0, "an idle link is checked this often (a dead rollout is found within heartbeat_s + timeout_s)", min=0.05
    )

    @property
    def enabled(self) -> bool:
        return self.port > 0


def backend_for(setting_: str, device: torch.device) -> str:
    """The backend `setting_` means for a policy on `device`."""
    if setting_ != "auto":
        return setting_
    return "nccl" if device.type == "cuda" and torch.cuda.device_count() > 1 else "gloo"


class WeightLinkSender:
    """Serves `policy_id`'s versions (layout `spec`, sent in `dtype`) to every rollout that joins at host:port."""

    def __init__(
        self,
        config: LinkServe,
        *,
        policy_id: str,
        spec: WeightSpec,
        dtype: torch.dtype,
        device: torch.device,
        log: logging.Logger | None = None,
    ) -> None:
        self.config = config
        self.log = log or _log
        self.address = f"{config.host}:{config.port}"
        self.backend = backend_for(config.backend, device)
        self.device = device if self.backend == "nccl" else torch.device("cpu")
        self.dtype_code = wire.dtype_code(dtype)
        self.spec_hash = wire.spec_hash(spec)
        self.numel = spec.numel
        self.dropped = 0  # rollouts dropped for a missed deadline or a broken link
        self.joined = 0  # generations joined so far
        timeout = timedelta(seconds=config.timeout_s)
        try:
            self._server = TCPStore(config.host, config.port, None, True, timeout, wait_for_workers=False)
            # a client of its own for the accept thread: a store client runs one operation at a time, and that
            # thread waits in one for the next join
            self._store = TCPStore(config.host, config.port, None, False, timeout)
        except RuntimeError as exc:  # the port is taken, the host is not this machine's
            raise LinkError(f"weight link: cannot listen on {self.address}: {wire.first_line(exc)}") from exc
        offer = wire.Offer(policy_id, self.numel, self.spec_hash, self.backend, config.heartbeat_s, config.timeout_s)
        self._server.set(wire.KEY_OFFER, offer.to_json())
        self._newest = Newest()
        self._peers: dict[int, LinkPeer] = {}
        self._lock = threading.Lock()
        self._next = 1  # the generation the accept thread waits for
        self._accept = threading.Thread(target=self._accept_joins, name="weight-link-accept", daemon=True)
        self._accept.start()
        self.log.info(
            "weight link: serving policy %r to co-located rollouts at %s (%s)", policy_id, self.address, self.backend
        )

    def offer(self, weights: FlatWeights) -> None:
        """The newest version: each joined rollout's thread sends it (training does not wait for them)."""
        self._newest.put(weights)

    def acked(self) -> dict[int, int]:
        """Generation -> the version that rollout acts with, for every rollout joined now."""
        with self._lock:
            return {g: p.acked for g, p in self._peers.items()}

    def close(self) -> None:
        """Say goodbye to every rollout (within the deadline), stop accepting, let go of the port."""
        self._newest.stop()
        final = int(self._server.add(wire.KEY_JOINS, 1))  # a last join record ends the accept thread's wait
        self._server.set(wire.key_join(final), "")
        self._accept.join(self.config.timeout_s)
        with self._lock:
            peers = list(self._peers.values())
        for peer in peers:
            peer.join(self.config.timeout_s)

    # ---- accept thread --------------------------------------------------------------------------

    def _accept_joins(self) -> None:
        while not self._newest.stopped:
            key = wire.key_join(self._next)
            try:
                self._store.wait([key], timedelta(seconds=ACCEPT_WAIT_S))
                record = self._store.get(key).decode()
            except RuntimeError:
                continue  # no join for an hour, or the store is closing: look again / stop
            generation, self._next = self._next, self._next + 1
            if self._newest.stopped or not record:
                return
            self._start_peer(generation, record)

    def _start_peer(self, generation: int, name: str) -> None:
        try:
            group = wire.open_pair(
                self._store,
                generation,
                wire.SENDER,
                backend=self.backend,
                timeout_s=self.config.timeout_s,
                host=self.config.host,
            )
        except RuntimeError as exc:
            self.dropped += 1
            self.log.warning(
                "weight link: rollout %s (generation %d) did not complete its join: %s",
                name,
                generation,
                wire.first_line(exc),
            )
            return
        peer = LinkPeer(self, group, generation, name, self._newest)
        with self._lock:
            self._peers[generation] = peer
            self.joined += 1
        self.log.info("weight link: rollout %s joined (generation %d)", name, generation)
        peer.start()

    def forget(self, peer: LinkPeer, reason: str | None) -> None:
        """A peer's thread ended: dropped (`reason`, one line) or closed."""
        with self._lock:
            self._peers.pop(peer.generation, None)
        if reason is not None:
            self.dropped += 1
            self.log.warning(
                "weight link: dropped rollout %s (generation %d, acting with version %d): %s; training goes on and "
                "the Bus still publishes; it may join again",
                peer.name,
                peer.generation,
                peer.acked,
                reason,
            )


__all__ = ["LinkError", "LinkServe", "WeightLinkSender"]


def link_sender(
    config: LinkServe, policy_id: str, policy: Policy, dtype: torch.dtype, log: logging.Logger
) -> WeightLinkSender | None:
    """The learner's sender of `config` for `policy` (None when its port is 0: weights go over the Bus only)."""
    if not config.enabled:
        return None
    return WeightLinkSender(
        config, policy_id=policy_id, spec=policy.weight_spec, dtype=dtype, device=policy.device, log=log
    )
