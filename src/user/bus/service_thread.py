"""`ServiceThread`: where a bus runs the requests of its `OwnThread` services, off the callback lock.

One thread per bus, started by the first such service: requests are handled one at a time, in arrival
order, while the node's subscriptions and timers go on. An idle thread looks every `POLL_S` whether its
bus closed; closing waits `JOIN_S` at most for a handler still running (the thread is a daemon).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

POLL_S = 0.5
JOIN_S = 2.0

_log = logging.getLogger(__name__)


class ServiceThread:
    """Runs submitted jobs (answer one request) one at a time on a thread of its own."""

    def __init__(self, node: str) -> None:
        self._node = node
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{node}-services", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        """Queue `job`; never blocks (the caller is the transport's thread)."""
        self._jobs.put(job)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=POLL_S)
            except queue.Empty:
                continue
            try:
                job()
            except Exception:  # e.g. a reply after the caller's deadline: logged, and the next request goes on
                _log.exception("node %s: answering a service request failed", self._node)
            del job  # what the job holds (a query) goes now, not when the next one comes

    def stop(self) -> None:
        """Stop taking requests; wait `JOIN_S` at most for the one being handled."""
        self._stop.set()
        self._thread.join(JOIN_S)
        if self._thread.is_alive():
            _log.warning("node %s: a service handler still runs %.1f s after the bus closed", self._node, JOIN_S)
