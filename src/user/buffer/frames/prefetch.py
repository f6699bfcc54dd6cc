"""Background batch preparation, so the learner's `sample` returns a ready batch instead of reading disk."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from user.buffer.errors import SampleTimeoutError

_log = logging.getLogger("user.buffer.prefetch")

T = TypeVar("T")
POLL_S = 0.1  # how often the worker checks for a stop request while waiting


@dataclass(frozen=True)
class _Failed:
    """What `produce` raised in place of an item: `get` raises it in turn."""

    error: Exception


class Prefetcher(Generic[T]):
    """One worker thread calls `produce(timeout_s)` (None: nothing yet) and keeps up to `depth` results queued.

    An exception in `produce` (a batch that could not be read) takes that item's place in the queue: the `get`
    that would have returned the item raises it, and the worker goes on producing. Anything else that ends the
    worker (a BaseException that is not an Exception) is raised by every later `get`.
    """

    def __init__(self, produce: Callable[[float], T | None], depth: int, name: str = "buffer-prefetch") -> None:
        self._produce = produce
        self._queue: queue.Queue[T | _Failed] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            item: T | _Failed | None
            try:
                item = self._produce(POLL_S)
            except Exception as exc:  # handed to the consumer in the item's place; the next item may be fine
                item = _Failed(exc)
            except BaseException as exc:  # handed to the consumer, which raises it; the worker ends
                self._error = exc
                return
            if item is None:
                continue
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=POLL_S)
                    break
                except queue.Full:
                    continue

    def get(self, timeout_s: float) -> T:
        """The next prepared item; `SampleTimeoutError` if none is ready within `timeout_s`."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            remaining = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=max(0.0, min(POLL_S, remaining)))
            except queue.Empty:
                if self._error is not None:
                    raise self._error from None
                if remaining <= POLL_S:
                    raise SampleTimeoutError(f"no batch ready within {timeout_s:.3g} s") from None
                continue
            if isinstance(item, _Failed):
                raise item.error
            return item

    def ready(self) -> int:
        """Items waiting in the queue."""
        return self._queue.qsize()

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            _log.warning("prefetch worker did not stop within %.1f s", timeout_s)
