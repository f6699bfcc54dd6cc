"""`WeightLinkReceiver`: a co-located rollout's end of a weight link (`user.sync.weight_link`).

At start it reaches the learner's link store at `address` (unreachable within `timeout_s`: a `ConfigError` naming the
address, never a silent fall back to the Bus), checks that the learner serves this policy id and layout, and joins
under a new generation. Its thread then answers the sender: a ping with the version in use; a version header that
does not fit this policy (layout, size, dtype) with a refusal, counted and logged, the version in use staying; a
fitting one by receiving the flat tensor into a staging buffer, checking it is finite, and applying it whole with
`Policy.load_weights` under the lock that `snapshot` (what the rollout's acting copies are made from) takes, so no
reader ever sees half of two versions. Then it replies with the version now in use: the sender's acknowledgement.
The rollout's actions carry that version, as they do with the Bus.

When the learner goes silent beyond its heartbeat and deadline, or closes the link, the receiver joins again (a new
generation) until it is closed; meanwhile it keeps acting with the version it has.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
from torch._C._distributed_c10d import TCPStore

from user.config.strict import ConfigError, setting
from user.interfaces.refusals import Refusals
from user.policies.base import FlatWeights, Policy, PolicyError
from user.sync import link_wire as wire
from user.sync.in_use import WeightsInUse
from user.sync.link_wire import LinkError

_log = logging.getLogger(__name__)

REJOIN_PAUSE_S = 0.5  # between attempts to join again after the link was lost


@dataclass(frozen=True)
class LinkJoin:
    """Rollout side: where the learner on this machine serves weights over torch.distributed."""

    address: str = setting("127.0.0.1:29600", "the learner's weight_link host:port (its weight_link.port)")
    timeout_s: float = setting(
        10.0, "deadline to reach the learner at start (else an error) and of every join and exchange, s", min=0.1
    )


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"weight_link.address: {address!r} is not host:port (e.g. 127.0.0.1:29600)")
    return host, int(port)


class WeightLinkReceiver(WeightsInUse):
    """Receives `policy_id`'s versions over the link at `config.address` and applies them whole to `policy`."""

    def __init__(
        self,
        config: LinkJoin,
        policy: Policy,
        *,
        policy_id: str,
        name: str = "rollout",
        log: logging.Logger | None = None,
    ) -> None:
        super().__init__(policy)
        self.config = config
        self.policy_id = policy_id
        self.name = name
        self.log = log or _log
        self.host, self.port = parse_address(config.address)
        self.refusals = Refusals(self.log)
        self.received_versions = 0  # versions received whole and applied
        self.rejected = 0  # version headers or tensors refused (layout, size, dtype, not finite)
        self.joins = 0  # generations joined (1 + times joined again)
        self._stop = threading.Event()
        self._staging: torch.Tensor | None = None
        self._head = torch.empty(6, dtype=torch.int64)
        self._group_lock = threading.Lock()
        self._group: Any = None
        try:
            self._offer, self._group = self._join()
        except (RuntimeError, LinkError) as exc:
            raise ConfigError(
                f"weights_from: link: cannot join the learner's weight link at {config.address} within "
                f"{config.timeout_s:g} s: {wire.first_line(exc)} (is the learner running with weight_link.port "
                f"{self.port} on this machine?)"
            ) from exc
        self._thread = threading.Thread(target=self._run, name="weight-link-receiver", daemon=True)
        self._thread.start()

    # ---- what the rollout reads (user.acting.pinning.WeightSource) ------------------------------

    def close(self) -> None:
        self._stop.set()
        with self._group_lock:
            if self._group is not None:
                wire.close_group(self._group)  # a receive in progress ends now
        self._thread.join(self.config.timeout_s + REJOIN_PAUSE_S)

    # ---- joining --------------------------------------------------------------------------------

    def _join(self) -> tuple[wire.Offer, Any]:
        """Reach the store, check the offer, join under the next generation: (offer, group)."""
        timeout = timedelta(seconds=self.config.timeout_s)
        store = TCPStore(self.host, self.port, None, False, timeout)
        store.wait([wire.KEY_OFFER], timeout)
        offer = wire.Offer.from_json(store.get(wire.KEY_OFFER))
        self._check_offer(offer)
        generation = int(store.add(wire.KEY_JOINS, 1))
        store.set(wire.key_join(generation), self.name)
        group = wire.open_pair(
            store, generation, wire.RECEIVER, backend=offer.backend, timeout_s=self.config.timeout_s, host=self.host
        )
        self.joins += 1
        self.log.info(
            "weight link: joined the learner at %s (generation %d, %s)", self.config.address, generation, offer.backend
        )
        return offer, group

    def _check_offer(self, offer: wire.Offer) -> None:
        spec = self.policy.weight_spec
        if offer.policy_id != self.policy_id:
            raise ConfigError(
                f"weight link at {self.config.address} serves policy {offer.policy_id!r}, this rollout acts with "
                f"{self.policy_id!r}"
            )
        if offer.spec_hash != wire.spec_hash(spec) or offer.numel != spec.numel:
            raise ConfigError(
                f"weight link at {self.config.address} serves a policy of another layout ({offer.numel} parameters, "
                f"layout hash {offer.spec_hash:#x}) than this rollout's ({spec.numel}, {wire.spec_hash(spec):#x}): "
                "learning settings differ"
            )
        if offer.backend == "nccl" and self.policy.device.type != "cuda":
            raise ConfigError(
                f"weight link at {self.config.address} sends with nccl: the rollout's policy must be on a GPU"
            )

    def _rejoin(self) -> bool:
        """Join again until joined (True) or closed (False); each attempt within the deadline."""
        while not self._stop.wait(REJOIN_PAUSE_S):
            try:
                offer, group = self._join()
            except (RuntimeError, LinkError, ConfigError) as exc:
                self.refusals.refuse(
                    "join",
                    f"weight link: cannot join {self.config.address} again yet: {wire.first_line(exc)}",
                    logging.WARNING,
                )
                continue
            with self._group_lock:
                if self._stop.is_set():
                    wire.close_group(group)
                    return False
                self._offer, self._group = offer, group
            return True
        return False

    # ---- the link's thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                self._serve(self._group, self._offer)
                reason = "the learner closed the link"
            except (RuntimeError, LinkError) as exc:
                reason = wire.first_line(exc)
            with self._group_lock:
                wire.close_group(self._group)
                self._group = None
            if self._stop.is_set():
                return
            self.log.warning(
                "weight link to %s lost (%s); acting on with version %d, joining again",
                self.config.address,
                reason,
                self.version,
            )
            if not self._rejoin():
                return

    def _serve(self, group: Any, offer: wire.Offer) -> None:
        """Answer the sender until it says goodbye; raises when it goes silent or the link breaks."""
        silence_s = offer.heartbeat_s + offer.timeout_s
        device = self.policy.device if offer.backend == "nccl" else torch.device("cpu")
        head = self._head.to(device)
        while not self._stop.is_set():
            wire.recv(group, head, wire.SENDER, wire.TAG_HEADER, silence_s)
            header = wire.Header.parse(head)
            if header.kind == wire.BYE:
                return
            if header.kind == wire.PING:
                self._reply(group, wire.ALIVE, device)
            else:
                self._receive_version(group, header, device)

    def _reply(self, group: Any, code: int, device: torch.device) -> None:
        wire.send(group, wire.reply(code, self.version, device), wire.SENDER, wire.TAG_REPLY, self.config.timeout_s)

    def _refuse(self, group: Any, version: int, cause: str, problem: str, device: torch.device) -> None:
        self.rejected += 1
        where = f"weights: version {version} of policy {self.policy_id!r} from the weight link at {self.config.address}"
        self.refusals.refuse(cause, f"{where} refused: {problem}; acting on with version {self.version}")
        self._reply(group, wire.REFUSED, device)

    def _receive_version(self, group: Any, header: wire.Header, device: torch.device) -> None:
        version = header.version
        problem = self._misfit(header)
        if problem is not None:
            self._refuse(group, version, "link layout", problem, device)
            return
        if version <= self.version:
            self._reply(group, wire.STALE, device)
            return
        self._reply(group, wire.READY, device)
        staging = self._staging_for(header.numel, wire.dtype_of(header.dtype) or torch.float32, device)
        wire.recv(group, staging, wire.SENDER, wire.TAG_DATA, self.config.timeout_s)
        if not bool(torch.isfinite(staging).all()):
            self._refuse(group, version, "link not finite", "values that are not finite", device)
            return
        try:
            with self._changed:  # whole, under the lock readers take
                self.policy.load_weights(FlatWeights(staging, self.policy.weight_spec, version))
                self._changed.notify_all()
        except PolicyError as exc:
            self._refuse(group, version, "link apply", str(exc), device)
            return
        self.received_versions += 1
        self.log.info("policy %r now acts with weights version %d (weight link)", self.policy_id, version)
        self._reply(group, wire.APPLIED, device)

    def _misfit(self, header: wire.Header) -> str | None:
        """Why a version header does not fit this policy, or None."""
        own, numel, spec, code, version = (
            self.policy.weight_spec,
            header.numel,
            header.spec,
            header.dtype,
            header.version,
        )
        if spec != wire.spec_hash(own) or numel != own.numel:
            return (
                f"it has another layout ({numel} parameters, layout hash {spec:#x}) than this rollout's policy "
                f"({own.numel}, {wire.spec_hash(own):#x})"
            )
        if wire.dtype_of(code) is None:
            return f"unknown dtype code {code}"
        if version < 1:
            return f"version {version} is not a learner's version (they start at 1)"
        return None

    def _staging_for(self, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        staging = self._staging
        if staging is None or staging.dtype != dtype or staging.device != device or staging.numel() != numel:
            staging = self._staging = torch.empty(numel, dtype=dtype, device=device)
        return staging
