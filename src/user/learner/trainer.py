"""The learner's training loop: batches from the replay buffer, `Algorithm.update`, weight publication.

`Trainer.run_async` trains on its own thread for as long as the buffer's rate limiter allows (the
update-to-data ratio is the limiter's samples-per-insert), so robots never wait for it. `Trainer.train`
does a fixed number of update calls and returns (the sync baseline: collect, then train, then publish).
Both paths share `_one_update`, so the two modes differ in scheduling only.

Time is accounted as busy (sampling finished, updating) or idle (waiting for data the rate limiter has not
yet allowed): `idle_fraction` is the share of wall time the learner had nothing to do.

A batch that cannot be read (a damaged or truncated record on disk, a transition that does not decode or does
not fit the batch) is skipped and counted, and its error logged once per cause; training goes on with the next
batch. Only when `max_unreadable_in_a_row` batches in a row fail does training stop: `failed` holds a
`TrainingDataError`, one error line says why, and `on_failure` is called, so the failure is seen, not spun on.

The update runs with the speed-ups of its `SpeedPlan` (`user.learner.speed`: autocast, channels-last, compile);
with `prefetch`, the async loop trains on batches a `Prefetcher` prepared on the device while the previous update
ran (sync mode never draws ahead: every phase's batches must see the newest episode).
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
from user.buffer.batch import BatchError, TransitionBatch
from user.buffer.errors import BufferIndexError, SampleTimeoutError, SegmentError
from user.buffer.replay import ReplayBuffer
from user.interfaces.codec import DecodeError
from user.learner.prefetch import Prefetcher, PrefetchTimeoutError, Prepared
from user.learner.speed import FastUpdate, SpeedPlan
from user.learner.state_select import StateSelector

_log = logging.getLogger("user.learner")

AfterUpdate = Callable[[int], None]  # called with the update-call count after each call
OnFailure = Callable[[BaseException], None]  # called once when the training thread stops on an error
MAX_UNREADABLE_IN_A_ROW = 20  # unreadable batches in a row after which training stops (the data is gone)
MAX_LOGGED_CAUSES = 100  # distinct read errors logged; later new ones are only counted
# what reading stored data raises: a record not there or not whole, a row that contradicts it, a transition that
# does not decode or does not fit the batch (an image that does not decode)
UNREADABLE = (SegmentError, BufferIndexError, BatchError, DecodeError)


class TrainingDataError(RuntimeError):
    """Batch after batch could not be read from the buffer: training stopped rather than spin on it."""


@dataclass
class TrainerCounters:
    """What the trainer has done; saved in checkpoints and restored on resume."""

    update_calls: int = 0  # calls of Algorithm.update
    gradient_steps: int = 0  # the algorithm's own step counter after the last call
    busy_s: float = 0.0  # wall time spent in updates
    idle_s: float = 0.0  # wall time spent waiting for an allowed batch
    feed_wait_s: float = 0.0  # of idle_s, the time data was there and allowed but the batch was still being made
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
        on_failure: OnFailure | None = None,
        max_unreadable_in_a_row: int = MAX_UNREADABLE_IN_A_ROW,
        speed: SpeedPlan | None = None,
        ranked: Callable[[TransitionBatch], TrainingStats] | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.buffer = buffer
        self.selector = selector
        self.sample_timeout_s = sample_timeout_s
        self.after_update = after_update
        self.on_failure = on_failure
        self.max_unreadable_in_a_row = max(1, max_unreadable_in_a_row)
        self.counters = TrainerCounters()
        self.failed: BaseException | None = None  # why the training thread stopped, if it did
        self.unreadable_batches = 0  # batches skipped because stored data could not be read
        self._unreadable_in_a_row = 0
        self._logged_causes: set[str] = set()
        self._lock = threading.Lock()  # one update at a time (async thread vs. sync calls vs. checkpoints)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._feed_wait_seen = 0.0  # the buffer's `wait_s` already counted
        self.ranked = ranked  # the update made by every rank of a learner on several (the lead's batches)
        self.speed = speed or SpeedPlan()
        if ranked is not None:  # the ranks share the lead's host batches: nothing is prepared ahead on one device
            self.speed = dataclasses.replace(self.speed, prefetch=False)
        self.fast = FastUpdate(algorithm, self.speed, _log)
        self._prefetcher: Prefetcher[TransitionBatch] | None = None

    # ---- modes ----------------------------------------------------------------------------------

    def start_async(self) -> None:
        """Train on a background thread until `stop`."""
        if self._thread is not None:
            raise RuntimeError("the trainer is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="learner-train", daemon=True)
        self._thread.start()

    def train(self, update_calls: int, timeout_s: float) -> int:
        """Sync mode: up to `update_calls` updates now, within `timeout_s`; returns how many were done.
        Raises `TrainingDataError` (also kept in `failed`) when batch after batch cannot be read."""
        deadline = time.monotonic() + timeout_s
        done = 0
        while done < update_calls and not self._stop.is_set() and time.monotonic() < deadline:
            try:
                updated = self._one_update(min(self.sample_timeout_s, max(0.0, deadline - time.monotonic())))
            except TrainingDataError as exc:
                self._failed(exc)
                raise
            done += int(updated)
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

    def feed_wait_fraction(self) -> float:
        """Share of wall time the learner waited for the buffer to make a batch of data it was allowed."""
        c = self.counters
        total = c.busy_s + c.idle_s
        return c.feed_wait_s / total if total > 0 else 0.0

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
        if self.speed.prefetch and self.algorithm.trains_prepared:
            self._prefetcher = Prefetcher(
                lambda timeout_s: self._select(self.buffer.sample(timeout_s=timeout_s)),
                self.fast.prepare,
                self.algorithm.policy.device,
                timeouts=(SampleTimeoutError,),
            )
        try:
            while not self._stop.is_set():
                self._one_update(self.sample_timeout_s)
        except Exception as exc:
            self._failed(exc)
        finally:
            if self._prefetcher is not None and not self._prefetcher.close():
                _log.error("the batch prefetcher did not stop")
            self._prefetcher = None

    def _failed(self, exc: BaseException) -> None:
        """The training thread (or a sync call) stops on `exc`: keep it, say so once, tell `on_failure`."""
        self.failed = exc
        if isinstance(exc, TrainingDataError):
            _log.error("training stopped: %s", exc)
        else:
            _log.exception("training stopped: %s", exc)
        if self.on_failure is not None:
            self.on_failure(exc)

    def _draw(self, timeout_s: float) -> TransitionBatch | Prepared:
        """The next batch: prepared on the device when prefetching, else straight from the buffer."""
        if self._prefetcher is not None:
            return self._prefetcher.get(timeout_s)
        return self._select(self.buffer.sample(timeout_s=timeout_s))

    def _one_update(self, timeout_s: float) -> bool:
        started = time.monotonic()
        try:
            batch = self._draw(timeout_s)
        except (SampleTimeoutError, PrefetchTimeoutError):
            self.counters.idle_s += time.monotonic() - started
            return False
        except UNREADABLE as exc:
            self.counters.idle_s += time.monotonic() - started
            self._unreadable(exc)
            return False
        self._unreadable_in_a_row = 0
        sampled = time.monotonic()
        with self._lock:
            stats = self._update(batch)
            self._account(stats, started, sampled)
            calls = self.counters.update_calls
        if self.after_update is not None:
            self.after_update(calls)
        return True

    def _update(self, batch: TransitionBatch | Prepared) -> TrainingStats:
        if self.ranked is not None and isinstance(batch, TransitionBatch):
            return self.ranked(batch)
        if isinstance(batch, Prepared):
            return self.fast.update_prepared(batch.batch())
        return self.fast.update(batch)

    def _unreadable(self, exc: Exception) -> None:
        """Skip a batch that could not be read: count it, log its cause the first time; `TrainingDataError` once
        `max_unreadable_in_a_row` batches in a row failed."""
        self.unreadable_batches += 1
        self._unreadable_in_a_row += 1
        cause = f"{type(exc).__name__}: {exc}"
        if cause not in self._logged_causes and len(self._logged_causes) < MAX_LOGGED_CAUSES:
            self._logged_causes.add(cause)
            _log.error(
                "skipped a batch that could not be read (%s); training goes on (%d unreadable batches so far; "
                "each cause is logged once)",
                cause,
                self.unreadable_batches,
            )
        if self._unreadable_in_a_row >= self.max_unreadable_in_a_row:
            raise TrainingDataError(
                f"{self._unreadable_in_a_row} batches in a row could not be read from the buffer (last: {cause}); "
                f"check it with `user buffer verify {self.buffer.storage.directory}`"
            ) from exc

    def _account(self, stats: TrainingStats, started: float, sampled: float) -> None:
        c = self.counters
        now = time.monotonic()
        c.idle_s += sampled - started
        c.busy_s += now - sampled
        waited = self.buffer.wait_s
        c.feed_wait_s += waited - self._feed_wait_seen
        self._feed_wait_seen = waited
        c.update_calls += 1
        c.gradient_steps = stats.updates
        c.last = {
            **{f"loss/{k}": float(v) for k, v in stats.losses.items()},
            **{k: float(v) for k, v in stats.info.items()},
        }

    def _select(self, batch: TransitionBatch) -> TransitionBatch:
        """The batch with only the state columns the policy sees (by the names the batch carries); a batch without a
        camera the policy looks at is a BatchError (skipped as unreadable), never a policy failing mid-update."""
        lacking = [camera for camera in self.algorithm.policy.cameras if camera not in batch.images]
        if lacking:
            raise BatchError(
                f"the batch has no image from camera(s) {lacking}, which the policy looks at (it has "
                f"{sorted(batch.images) or 'none'}): stored transitions without them"
            )
        cols = self.selector.columns(batch.state_names, int(batch.state.shape[1]))
        if cols is None:
            return batch
        return dataclasses.replace(
            batch,
            state=np.ascontiguousarray(batch.state[:, cols]),
            next_state=np.ascontiguousarray(batch.next_state[:, cols]),
            state_names=tuple(batch.state_names[i] for i in cols),
        )
