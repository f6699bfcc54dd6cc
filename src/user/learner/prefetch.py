"""Batches made ready on the device while the previous update runs.

A worker thread draws each batch (`draw`, the buffer's `sample` behind the state selection) and prepares it
(`prepare`: decoding, preprocessing, the copy to the device). On CUDA that happens on a side stream: host tensors
go through pinned memory with non-blocking copies, an event marks the batch ready, and `get` makes the caller's
stream wait for that event and records the batch's tensors on it (`Tensor.record_stream`), so the allocator keeps
their memory until the update that uses them is done. On CPU the same thread runs without streams.

Batches come out in the order they were drawn, `depth` at most waiting. What the worker raised comes out in its
place, in order: a draw error (a timeout is not one: the worker draws again) from `get`, a prepare error from
`Prepared.batch()` (where the update would have raised it). A draw that raises `StopIteration` ends the stream:
`get` raises `PrefetchClosedError` once the batches before it are taken.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Generic, TypeVar

import torch

from user.algorithms.base import TorchBatch
from user.policies.base import TensorObs

T = TypeVar("T")
POLL_S = 0.1  # how often a waiting worker looks for `close`


class PrefetchTimeoutError(TimeoutError):
    """No prepared batch was ready before the deadline."""


class PrefetchClosedError(RuntimeError):
    """The prefetcher was closed or its source ended: no more batches."""


@dataclass
class Prepared:
    """One drawn batch, prepared on the device, or what preparing it raised."""

    prepared: TorchBatch | None
    error: BaseException | None = None

    def batch(self) -> TorchBatch:
        if self.error is not None:
            raise self.error
        assert self.prepared is not None
        return self.prepared


@dataclass
class _Item:
    prepared: Prepared | None  # None: the draw raised `draw_error`, or the source ended (both None)
    draw_error: BaseException | None
    ready: torch.cuda.Event | None  # recorded on the side stream after the batch's copies and kernels


def batch_tensors(batch: TorchBatch) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, TensorObs):
            out.extend([value.state, *value.images.values()])
        elif value is not None:  # an action chunk, when the batch has none
            out.append(value)
    return out


class Prefetcher(Generic[T]):
    """Draws and prepares batches on a worker thread (on a side CUDA stream on a GPU); `get` hands them out."""

    def __init__(
        self,
        draw: Callable[[float], T],
        prepare: Callable[[T], TorchBatch],
        device: torch.device,
        *,
        depth: int = 1,
        timeouts: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._draw = draw  # called with a timeout in s; raises one of `timeouts` when nothing came in time
        self._prepare = prepare
        self._timeouts = timeouts
        side = torch.cuda.Stream(device) if device.type == "cuda" else None  # type: ignore[no-untyped-call]
        self._stream: torch.cuda.Stream | None = side
        self._queue: queue.Queue[_Item] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._work, name="learner-prefetch", daemon=True)
        self._thread.start()

    def get(self, timeout_s: float) -> Prepared:
        """The next prepared batch, ready for the current stream; `PrefetchTimeoutError` when none came within
        `timeout_s`, the draw's error in its place, `PrefetchClosedError` after the end."""
        if self._ended:
            raise PrefetchClosedError("the prefetcher's source ended or it was closed")
        try:
            item = self._queue.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            raise PrefetchTimeoutError(f"no batch ready within {timeout_s:.3f} s") from None
        if item.draw_error is not None:
            raise item.draw_error
        if item.prepared is None:
            self._ended = True
            raise PrefetchClosedError("the prefetcher's source ended")
        if item.ready is not None and item.prepared.prepared is not None:
            stream = torch.cuda.current_stream()
            stream.wait_event(item.ready)
            for t in batch_tensors(item.prepared.prepared):
                t.record_stream(stream)
        return item.prepared

    def close(self, timeout_s: float = 5.0) -> bool:
        """Stop the worker (batches not taken are dropped); False if it did not end within `timeout_s`."""
        self._stop.set()
        self._ended = True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _work(self) -> None:
        while not self._stop.is_set():
            item = self._next()
            if item is None:
                continue
            if not self._put(item) or (item.prepared is None and item.draw_error is None):
                return

    def _next(self) -> _Item | None:
        try:
            drawn = self._draw(POLL_S)
        except StopIteration:
            return _Item(None, None, None)
        except self._timeouts:
            return None
        except Exception as exc:
            return _Item(None, exc, None)
        try:
            if self._stream is None:
                return _Item(Prepared(self._prepare(drawn)), None, None)
            with torch.cuda.stream(self._stream):
                prepared = self._prepare(drawn)
                ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
                ready.record(self._stream)
            return _Item(Prepared(prepared), None, ready)
        except Exception as exc:
            return _Item(Prepared(None, exc), None, None)

    def _put(self, item: _Item) -> bool:
        """Queue `item`, looking for `close` every `POLL_S`; False when closed first."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue  # the put itself waited POLL_S
        return False
