"""What goes over a weight link (`user.sync.weight_link`), and the process group of one link generation.

One link generation is a process group of two ranks: the learner's process (rank 0, the sender) and one co-located
rollout (rank 1, the receiver), built directly from a `TCPStore` under its own key prefix, so it is independent of
any default group the learner's process may belong to (its lead may be rank 0 of a torchrun world). Gloo on CPU,
NCCL when the weights live on a GPU; the same point-to-point calls either way, each awaited with a deadline.

Every exchange starts with a header from the sender, which the receiver answers with a reply:

- header, int64[6]: MAGIC, kind (VERSION, PING, BYE), version, numel, dtype code, spec hash;
- reply, int64[3]: MAGIC, code (READY, REFUSED, STALE, APPLIED, ALIVE), the version the receiver acts with.

For a VERSION the receiver answers READY (or REFUSED / STALE: nothing more is sent), then receives the flat tensor
into a staging buffer and answers APPLIED once the version is in use. So the sender knows, for each rollout, the
version it acts with; a receiver that dies or hangs misses a deadline and is dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import torch
from torch.distributed.distributed_c10d import PrefixStore, ProcessGroupGloo

from user.policies.base import WeightSpec
from user.sync.chunking import DTYPES
from user.sync.errors import WeightSyncError

MAGIC = 0x55534C4B  # "USLK"
VERSION, PING, BYE = 1, 2, 3  # header kinds
READY, REFUSED, STALE, APPLIED, ALIVE = 1, 2, 3, 4, 5  # reply codes
TAG_HEADER, TAG_DATA, TAG_REPLY = 1, 2, 3
KEY_OFFER = "user/weight_link/offer"  # what the sender serves (an `Offer`, JSON)
KEY_JOINS = "user/weight_link/joins"  # counter: each join takes the next generation
SENDER, RECEIVER = 0, 1  # ranks in a link generation


class LinkError(WeightSyncError):
    """A weight link could not be opened, or an exchange over it failed or missed its deadline."""


def spec_hash(spec: WeightSpec) -> int:
    """A 63-bit digest of a weight layout (names and shapes in order): equal layouts, equal hashes."""
    digest = hashlib.sha256(repr((spec.names, spec.shapes)).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def dtype_code(dtype: torch.dtype) -> int:
    for code, name in enumerate(sorted(DTYPES)):
        if DTYPES[name] == dtype:
            return code + 1
    raise LinkError(f"weight link: dtype {dtype} cannot be sent (one of {', '.join(sorted(DTYPES))})")


def dtype_of(code: int) -> torch.dtype | None:
    names = sorted(DTYPES)
    return DTYPES[names[code - 1]] if 1 <= code <= len(names) else None


@dataclass(frozen=True)
class Offer:
    """What a sender serves, written to its store for receivers to check before they join."""

    policy_id: str
    numel: int
    spec_hash: int
    backend: str  # "gloo" or "nccl"
    heartbeat_s: float  # an idle link is pinged this often
    timeout_s: float  # the deadline of every exchange

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: bytes) -> Offer:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError) as exc:
            raise LinkError(f"weight link: the learner's offer does not parse ({exc})") from exc


def key_join(generation: int) -> str:
    """Where a receiver says which generation it joins (the sender waits for the next one in turn)."""
    return f"user/weight_link/join/{generation}"


def open_pair(store: Any, generation: int, rank: int, *, backend: str, timeout_s: float, host: str) -> Any:
    """The process group of link `generation` (ranks SENDER and RECEIVER), rendezvous within `timeout_s`."""
    prefixed = PrefixStore(f"user/weight_link/{generation}/", store)
    timeout = timedelta(seconds=timeout_s)
    if backend == "nccl":
        from torch.distributed import ProcessGroupNCCL  # type: ignore[attr-defined,unused-ignore]

        options = ProcessGroupNCCL.Options()
        options._timeout = timeout
        return ProcessGroupNCCL(prefixed, rank, 2, options)
    # options with a device: gloo's pairs bind to the link's host, not to whatever the machine's hostname resolves to
    options = ProcessGroupGloo._Options()  # type: ignore[attr-defined]
    options._timeout = timeout
    options._devices = [ProcessGroupGloo.create_device(hostname=host)]
    return ProcessGroupGloo(prefixed, rank, 2, options)


def send(group: Any, tensor: torch.Tensor, peer: int, tag: int, timeout_s: float) -> None:
    group.send([tensor], peer, tag).wait(timedelta(seconds=timeout_s))


def recv(group: Any, tensor: torch.Tensor, peer: int, tag: int, timeout_s: float) -> None:
    group.recv([tensor], peer, tag).wait(timedelta(seconds=timeout_s))


@dataclass(frozen=True)
class Header:
    """What the sender says before each exchange."""

    kind: int  # VERSION, PING or BYE
    version: int = 0
    numel: int = 0  # elements of the flat tensor that follows a VERSION
    dtype: int = 0  # `dtype_code` of that tensor
    spec: int = 0  # `spec_hash` of its layout

    def tensor(self, device: torch.device) -> torch.Tensor:
        values = [MAGIC, self.kind, self.version, self.numel, self.dtype, self.spec]
        return torch.tensor(values, dtype=torch.int64, device=device)

    @classmethod
    def parse(cls, buffer: torch.Tensor) -> Header:
        magic, kind, version, numel, dtype, spec = (int(v) for v in buffer.tolist())
        if magic != MAGIC or kind not in (VERSION, PING, BYE):
            raise LinkError(f"weight link: a header that is not one (magic {magic:#x}, kind {kind})")
        return cls(kind, version, numel, dtype, spec)


def reply(code: int, version: int, device: torch.device) -> torch.Tensor:
    return torch.tensor([MAGIC, code, version], dtype=torch.int64, device=device)


def checked_reply(buffer: torch.Tensor) -> tuple[int, int]:
    """(code, version) of a received reply; a LinkError when it is not one."""
    magic, code, version = (int(v) for v in buffer.tolist())
    if magic != MAGIC or code not in (READY, REFUSED, STALE, APPLIED, ALIVE):
        raise LinkError(f"weight link: a reply that is not one (magic {magic:#x}, code {code})")
    return code, version


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (torch's c10d errors go on for several)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def close_group(group: Any) -> None:
    """End a link generation at once: pending operations on both sides fail instead of waiting their deadline."""
    with contextlib.suppress(RuntimeError):  # already aborted
        group.abort()
