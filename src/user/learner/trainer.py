"""The learner's training loop: batches from the replay buffer, `Algorithm.update`, weight publication.

`Trainer.run_async` trains on its own thread for as long as the buffer's rate limiter allows (the
update-to-data ratio is the limiter's samples-per-insert), so robots never wait for it. `Trainer.train`
does a fixed number of update calls and returns (the sync baseline: collect, then train, then publish).
Both paths share `_one_update`, so the two modes differ in scheduling only.

Time is accounted as busy (sampling finished, updating) or idle (waiting for data the rate limiter has not
yet allowed): `idle_fraction` is the share of wall time the learner had nothing to do.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from user.algorithms.base import Algorithm, TrainingStats
from user.buffer.batch import TransitionBatch
from user.buffer.errors import SampleTimeoutError
from user.buffer.replay import ReplayBuffer
from user.learner.state_select import StateSelector

_log = logging.getLogger("user.learner")

AfterUpdate = Callable[[int], None]  # called with the update-call count after each call


@dataclass
class TrainerCounters:
    """What the trainer has done; saved in checkpoints and restored on resume."""

    update_calls: int = 0  # calls of Algorithm.update
    gradient_steps: int = 0  # the algorithm's own step counter after the last call
    busy_s: float = 0.0  # wall time spent in updates
    idle_s: float = 0.0  # wall time spent waiting for an allowed batch
    last: dict[str, float] = field(default_factory=dict)  # losses and diagnostics of the last update


class Trainer:
    """Drives `algorithm` from `buffer`; thread-safe start/stop; one training thread at most."""

    def __init__(
        self,
        algorithm: Algorithm,
        buffer: ReplayBuffer,
        selector: StateSelector,
        *,
        sample_timeout_s: float = 0.5,
        after_update: AfterUpdate | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.buffer = buffer
        self.selector = selector
        self.sample_timeout_s = sample_timeout_s
        self.after_update = after_update
        self.counters = TrainerCounters()
        self.failed: BaseException | None = None
        self._lock = threading.Lock()  # one update at a time (async thread vs. sync calls vs. checkpoints)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()

    # ---- modes ----------------------------------------------------------------------------------

    def start_async(self) -> None:
        """Train on a background thread until `stop`."""
        if self._thread is not None:
            raise RuntimeError("the trainer is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="learner-train", daemon=True)
        self._thread.start()

    def train(self, update_calls: int, timeout_s: float) -> int:
        """Sync mode: up to `update_calls` updates now, within `timeout_s`; returns how many were done."""
        deadline = time.monotonic() + timeout_s
        done = 0
        while done < update_calls and not self._stop.is_set() and time.monotonic() < deadline:
            if self._one_update(min(self.sample_timeout_s, max(0.0, deadline - time.monotonic()))):
                done += 1
        return done

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop the background thread; False if it did not end within `timeout_s`."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- accounting -----------------------------------------------------------------------------

    def idle_fraction(self) -> float:
        c = self.counters
        total = c.busy_s + c.idle_s
        return c.idle_s / total if total > 0 else 1.0

    def snapshot(self) -> TrainerCounters:
        with self._lock:
            return dataclasses.replace(self.counters, last=dict(self.counters.last))

    def restore(self, counters: TrainerCounters) -> None:
        with self._lock:
            self.counters = counters

    def locked(self) -> threading.Lock:
        """Held while an update runs: hold it to read or save the algorithm consistently."""
        return self._lock

    # ---- the loop -------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._one_update(self.sample_timeout_s)
        except Exception as exc:
            self.failed = exc
            _log.exception("training stopped: %s", exc)

    def _one_update(self, timeout_s: float) -> bool:
        started = time.monotonic()
        try:
            batch = self.buffer.sample(timeout_s=timeout_s)
        except SampleTimeoutError:
            self.counters.idle_s += time.monotonic() - started
            return False
        sampled = time.monotonic()
        batch = self._select(batch)
        with self._lock:
            stats = self.algorithm.update(batch)
            self._account(stats, started, sampled)
            calls = self.counters.update_calls
        if self.after_update is not None:
            self.after_update(calls)
        return True

    def _account(self, stats: TrainingStats, started: float, sampled: float) -> None:
        c = self.counters
        now = time.monotonic()
        c.idle_s += sampled - started
        c.busy_s += now - sampled
        c.update_calls += 1
        c.gradient_steps = stats.updates
        c.last = {
            **{f"loss/{k}": float(v) for k, v in stats.losses.items()},
            **{k: float(v) for k, v in stats.info.items()},
        }

    def _select(self, batch: TransitionBatch) -> TransitionBatch:
        """The batch with only the state columns the policy sees (by the names the batch carries)."""
        cols = self.selector.columns(batch.state_names, int(batch.state.shape[1]))
        if cols is None:
            return batch
        return dataclasses.replace(
            batch,
            state=np.ascontiguousarray(batch.state[:, cols]),
            next_state=np.ascontiguousarray(batch.next_state[:, cols]),
            state_names=tuple(batch.state_names[i] for i in cols),
        )
