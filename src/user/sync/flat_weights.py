"""Host copies of the policy's weights for publication, taking as little as possible from training on a GPU.

`get_weights` (today's path) casts and copies the policy's flat parameter buffer to pageable host memory on the
training stream, allocating each time. `FlatWeightCopier.copy` gives the same `FlatWeights` (the same bytes) from
preallocated buffers: on CUDA, one device-side snapshot in the wire dtype (a device-to-device copy with the cast,
microseconds, on the training stream, so it holds the weights of the updates queued before it), then the copy to
one pinned host buffer on a side stream created at the lowest priority CUDA offers (`torch.cuda.Stream(priority=0)`;
negative numbers are higher priorities, and 0 is also the default stream's), run by the copy engine, not by the
SMs; the host waits for that copy only. With `keep=0` it hands out its own copy of the pinned buffer (a publisher
may keep a version it published); with `keep=n` it rotates n + 1 pinned buffers and hands them out as they are,
each valid until n more copies were made (`WeightPublisher` keeps only the version it published last: n = 1).
On CPU it is today's path unless `preallocated` says otherwise. An actor sharded over the learner's ranks has no
whole flat buffer to copy from: its copies are `get_weights`', which gathers the shards first.
"""

from __future__ import annotations

import torch

from user.policies.base import FlatWeights, Policy, PolicyError


class FlatWeightCopier:
    """`policy.get_weights(dtype)` from preallocated buffers (a pinned one and a side stream on CUDA)."""

    def __init__(
        self, policy: Policy, dtype: torch.dtype | None = None, *, preallocated: bool | None = None, keep: int = 0
    ) -> None:
        self.policy = policy
        self.sharded = bool(getattr(policy, "sharded", False))  # no whole flat buffer: get_weights gathers
        source = policy._flat.buffer if self.sharded else self._source()
        self.dtype = dtype or source.dtype
        device = self.device = policy.device  # where the policy's parameters were when this copier was made
        self.preallocated = (device.type == "cuda" if preallocated is None else preallocated) and not self.sharded
        self._stream: torch.cuda.Stream | None = None
        self._snapshot: torch.Tensor | None = None
        if self.preallocated and device.type == "cuda":
            self._stream = torch.cuda.Stream(device, priority=0)  # type: ignore[no-untyped-call]  # the lowest priority (0 = least, -N = most)
            self._snapshot = torch.empty(source.numel(), dtype=self.dtype, device=device)
        pinned = self._stream is not None
        self._hosts = [torch.empty(source.numel(), dtype=self.dtype, pin_memory=pinned) for _ in range(keep + 1)]
        self.keep = keep  # copies handed out as they are stay valid for this many more copies; 0 = always a fresh one
        self._next = 0

    def current(self) -> bool:
        """Whether this copier still fits its policy (not moved to another device or sharded since it was made)."""
        return self.device == self.policy.device and self.sharded == bool(getattr(self.policy, "sharded", False))

    def _source(self) -> torch.Tensor:
        flat = self.policy._flat  # the policy's one flat parameter buffer (user.policies.base.FlatParameters)
        if not flat.intact():
            raise PolicyError("actor parameters were moved off the flat buffer (moved without Policy.to?)")
        return flat.buffer.detach()

    def copy(self) -> FlatWeights:
        """The policy's weights now, in `dtype`, on the host: equal to `policy.get_weights(dtype)`."""
        if self.sharded:
            return self.policy.get_weights(self.dtype)
        source = self._source()
        if not self.preallocated:
            data = source.to(device="cpu", dtype=self.dtype, copy=True)
            return FlatWeights(data, self.policy.weight_spec, self.policy.version)
        host = self._hosts[self._next]
        self._next = (self._next + 1) % len(self._hosts)
        with torch.no_grad():
            if self._stream is None or self._snapshot is None:
                host.copy_(source)
            else:
                self._snapshot.copy_(source)  # on the training stream: after the updates queued before it
                ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
                ready.record()
                self._stream.wait_event(ready)
                with torch.cuda.stream(self._stream):
                    host.copy_(self._snapshot, non_blocking=True)
                    done = torch.cuda.Event()  # type: ignore[no-untyped-call]
                    done.record(self._stream)
                done.synchronize()  # this copy only, not the training queued after it
        data = host if self.keep > 0 else host.clone()
        return FlatWeights(data, self.policy.weight_spec, self.policy.version)
