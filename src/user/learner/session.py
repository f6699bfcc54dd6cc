"""`LearningSession`: the learner's ROS-free core. It owns the persistent buffer, the policy and algorithm, the
training loop (async thread or sync phases), checkpoints and resume, counters and progress; the `learner`
node only wires topics and services to it, as the robot node does over `ControlLoop`.

Weights leave through a `WeightSink` (the node's `WeightPublisher`), made after the session because it
publishes the session's policy; `start(sink)` publishes the first version and starts training.

Divergence: after each update call the session checks the statistics the trainer recorded (losses,
temperature, ...). The first one that is not finite, or weights the sink refuses to publish (not finite),
halts publication for good with one error line naming the cause: robots keep the last good version, no
checkpoint overwrites the last good one (`TrainingHaltedError`), and the stats carry `publishing_halted`.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from user.buffer.config import BufferConfig, RateLimiterConfig
from user.buffer.info import BufferInfo
from user.buffer.replay import ReplayBuffer
from user.interfaces.domain import Transition
from user.learner.checkpoint import Checkpoint, CheckpointStore, CheckpointWriteError, LearnerCounters
from user.learner.config import LearningConfig, PacingConfig, check_batch_split
from user.learner.device import resolve_device
from user.learner.progress import ProgressLog
from user.learner.trainer import Trainer, TrainerCounters
from user.sync.errors import WeightSyncError

JOIN_TIMEOUT_S = 10.0
SYNC_POLL_S = 0.2  # how often the sync loop checks for shutdown while no episode arrives


class TrainingHaltedError(RuntimeError):
    """Training diverged (a loss or weight is not finite): nothing is published or checkpointed any more."""


class WeightSink(Protocol):
    """Where the session's weights go (`user.sync.WeightPublisher`)."""

    @property
    def version(self) -> int: ...

    def after_update(self) -> int | None: ...

    def publish_now(self) -> int: ...


@dataclass(frozen=True)
class SessionConfig:
    """What a learning session trains, where it keeps it and how it paces itself."""

    run_dir: Path  # buffer/, checkpoints/, progress.csv live here
    learning: LearningConfig  # policy and algorithm
    pacing: PacingConfig  # update-to-data ratio, mode, publication
    buffer: BufferConfig  # the persistent buffer (batch size, limiter and sampler are set from learning/pacing)
    device: str = "cpu"  # torch device of policy and algorithm
    resume: bool = True  # continue from checkpoints/latest.pt when it exists
    keep_checkpoints: int = 3  # numbered checkpoints kept beside latest.pt
    checkpoint_period_s: float = 60.0  # checkpoint at most this often while training; 0: only at close
    sync_train_timeout_s: float = 600.0  # sync mode: longest training phase


def learner_buffer_config(learning: LearningConfig, pacing: PacingConfig, buffer: BufferConfig) -> BufferConfig:
    """The buffer a learner opens: batch size from the algorithm, the rate limiter holding the update-to-data
    ratio (async) or off (sync: phases are sized explicitly), the algorithm's sampler, prefetch only in async
    mode (in sync mode every batch must see the newest episode)."""
    if pacing.mode == "async":  # samples per insert = rows per gradient step x gradient steps per transition
        spi = pacing.updates_per_step * learning.batch_size / learning.gradient_steps_per_update
    else:
        spi = 0.0
    limiter = RateLimiterConfig(
        samples_per_insert=spi,
        min_size=pacing.min_transitions,
        error_buffer=max(buffer.rate_limiter.error_buffer, float(learning.batch_size)),
    )
    return replace(
        buffer,
        rate_limiter=limiter,
        sampler=learning.sampler_for(buffer.sampler),
        batch_size=learning.batch_size,
        prefetch=buffer.prefetch if pacing.mode == "async" else 0,
    )


@dataclass
class SyncSchedule:
    """Sync mode: the update calls each stored episode is worth at the configured ratio; fractions carry over."""

    updates_per_step: float  # gradient steps per transition
    gradient_steps_per_update: int  # gradient steps one update call takes
    owed: float = 0.0  # update calls earned but not yet run (always < 1 after `calls_for`)

    def calls_for(self, steps: int) -> int:
        self.owed += self.updates_per_step * steps / self.gradient_steps_per_update
        calls = int(self.owed)
        self.owed -= calls
        return calls


@dataclass(frozen=True)
class SessionStats:
    """One progress report: the trainer's counters, the session's and the buffer's size."""

    trainer: TrainerCounters
    counters: LearnerCounters
    buffered: int
    gradient_steps_per_s: float
    values: dict[str, float] = field(default_factory=dict)  # named values for the stats message


class LearningSession:
    """Buffer + policy + algorithm + trainer + checkpoints; thread-safe `add`/`add_episode` from the bus."""

    def __init__(self, config: SessionConfig, log: logging.Logger | None = None) -> None:
        check_batch_split(config.learning)
        self.config = config
        self.log = log or logging.getLogger("user.learner.session")
        config.run_dir.mkdir(parents=True, exist_ok=True)
        learning = config.learning
        self.buffer = ReplayBuffer.open(
            config.run_dir / "buffer", learner_buffer_config(learning, config.pacing, config.buffer)
        )
        self.policy = learning.build_policy().to(resolve_device(config.device))
        self.algorithm = learning.build_algorithm(self.policy)
        self.counters = LearnerCounters()
        self.store = CheckpointStore(config.run_dir / "checkpoints", config.keep_checkpoints)
        self.trainer = Trainer(
            self.algorithm,
            self.buffer,
            learning.state_selector(),
            sample_timeout_s=config.pacing.sample_timeout_s,
            after_update=self._after_update,
        )
        self._lock = threading.Lock()  # counters and buffer writes (bus threads) vs. reports
        self._sink: WeightSink | None = None
        self._last_checkpoint = time.monotonic()
        self._sync_work: queue.Queue[tuple[int, tuple[str, int]]] = queue.Queue()  # (env steps, (robot, episode))
        self.on_trained: Callable[[str, int, int], None] | None = None  # sync: (robot, episode, first version
        # trained on it), once that version is published; a rollout waits for it before the robot's next episode
        self._sync = SyncSchedule(config.pacing.updates_per_step, learning.gradient_steps_per_update)
        self._sync_thread: threading.Thread | None = None
        self._steps_since_train = 0
        self._stop = threading.Event()
        self.halted: str | None = None  # why weights are no longer published (training diverged), if they are not
        self.resumed = self._resume() if config.resume else False
        self._last_report = (time.monotonic(), self.trainer.counters.gradient_steps)
        self.progress = ProgressLog(config.run_dir, index=self.buffer.storage.index)  # episodes stored: shown

    # ---- life -----------------------------------------------------------------------------------

    def start(self, sink: WeightSink) -> int:
        """Publish the first version (the resumed one + 1) so robots can act at once, then start training."""
        self._sink = sink
        self.counters.policy_version = sink.publish_now()
        if self.config.pacing.mode == "async":
            self.trainer.start_async()
        else:
            self._sync_thread = threading.Thread(target=self._sync_loop, name="learner-sync", daemon=True)
            self._sync_thread.start()
        return self.counters.policy_version

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        """Stop training, save a final checkpoint, close progress files and the buffer."""
        if self._stop.is_set():
            return
        self._stop.set()
        if not self.trainer.stop(JOIN_TIMEOUT_S):
            self.log.error("training thread did not stop within %.1f s", JOIN_TIMEOUT_S)
        c = self.trainer.snapshot()
        self.log.info("update-to-data ratio reached: %.3f gradient steps per transition (set %.3f), %d gradient "
                      "steps over %d transitions", self.ratio_reached(c.gradient_steps, self.counters.env_steps),
                      self.config.pacing.updates_per_step, c.gradient_steps, self.counters.env_steps)  # fmt: skip
        if self._sync_thread is not None:
            self._sync_thread.join(JOIN_TIMEOUT_S)
        try:
            if self.halted is None:
                self.save_checkpoint()
            else:
                self.log.error("no final checkpoint: %s", self.halted)
        except CheckpointWriteError as exc:
            self.log.error("no final checkpoint: %s", exc)
        finally:
            self.progress.close()
            with self._lock:
                self.buffer.close()

    # ---- data in --------------------------------------------------------------------------------

    def add(self, transition: Transition, payload: bytes | None = None) -> int | None:
        """Store one streamed transition; returns the buffer's episode number when it completed an episode.
        `payload`: its CDR bytes as received, stored as they are when given (see `ReplayBuffer.add`).
        Raises what the buffer raises for a transition it refuses (nothing is counted then)."""
        with self._lock:
            episode = self.buffer.add(transition, payload=payload)
            self.counters.env_steps += 1
            self._steps_since_train += 1
            if episode is None:
                return None
            steps = self._episode_stored(transition.success)
        self._queue_training(steps, (transition.robot_id, transition.episode_id))
        return episode

    def end_episode(self, robot_id: str, episode_id: int, steps: int) -> int | None:
        """A robot's END event: an episode it ended without a done step (an operator reset) is stored, its last
        step truncated, once all `steps` are here; returns the buffer's episode number when this call stored it."""
        with self._lock:
            episode = self.buffer.end_episode(robot_id, episode_id, steps)
            if episode is None:
                return None
            trained_steps = self._episode_stored(False)  # no done step: the scorer judged no success
        self._queue_training(trained_steps, (robot_id, episode_id))
        return episode

    def _episode_stored(self, success: bool) -> int:
        """Count a streamed episode that was just stored; the env steps since the last training phase."""
        self._count_episode(0, success)
        steps, self._steps_since_train = self._steps_since_train, 0
        return steps

    def _queue_training(self, steps: int, episode: tuple[str, int]) -> None:
        if self.config.pacing.mode == "sync":  # a training phase per stored episode
            self._sync_work.put((steps, episode))

    def add_episode(self, steps: list[Transition], payloads: Sequence[bytes | None] | None = None) -> bool:
        """Store a whole re-sent episode unless it is stored already; False when it was. `payloads`: the
        steps' CDR bytes as received, where they can be stored as they are (see `ReplayBuffer.add_episode`)."""
        with self._lock:
            if self.buffer.has_episode(steps[0].robot_id, steps[0].episode_id):
                return False
            self.buffer.add_episode(steps, payloads=payloads)
            self._count_episode(len(steps), steps[-1].success)
        self._queue_training(len(steps), (steps[0].robot_id, steps[0].episode_id))
        return True

    def _count_episode(self, steps: int, success: bool) -> None:
        """Count the episode the buffer stored last (callers hold the lock: no other was stored since)."""
        self.counters.episodes += 1
        self.counters.env_steps += steps
        self.counters.successes += int(success)
        self.progress.episode_stored(self.counters.env_steps)  # its return, length, success, interventions

    # ---- training -------------------------------------------------------------------------------

    def _after_update(self, calls: int) -> None:
        """Training thread, after each update call: check the update's statistics, publish when due, checkpoint
        when due; nothing of either once training diverged."""
        if not self._finite_update(calls):
            return
        if self._sink is not None:
            self._publish(self._sink.after_update)
        period = self.config.checkpoint_period_s
        if period > 0 and self.halted is None and time.monotonic() - self._last_checkpoint >= period:
            try:
                self.save_checkpoint()
            except CheckpointWriteError as exc:  # a full disk stops checkpoints, not training; tried again later
                self._last_checkpoint = time.monotonic()
                self.log.error("%s; training goes on, the next checkpoint is tried in %g s", exc, period)

    def _finite_update(self, calls: int) -> bool:
        """False once an update's losses or diagnostics were not finite (the policy is poisoned from then on)."""
        if self.halted is not None:
            return False
        bad = {k: v for k, v in self.trainer.counters.last.items() if not math.isfinite(v)}
        if bad:
            named = ", ".join(f"{k} = {v}" for k, v in sorted(bad.items()))
            self._halt(f"training diverged at update call {calls}: {named}")
        return not bad

    def _publish(self, publish: Callable[[], int | None]) -> None:
        """Publish through the sink unless halted; weights it refuses (not finite) halt publication."""
        if self.halted is not None:
            return
        try:
            version = publish()
        except WeightSyncError as exc:
            self._halt(str(exc))
            return
        if version is not None:
            self._published(version)

    def _halt(self, reason: str) -> None:
        """Stop publishing weights and writing checkpoints, for good, and say so once, loudly."""
        self.halted = reason
        self.log.error(
            "%s; weights are no longer published (robots keep acting with version %d, the last good one) and "
            "no checkpoint is written (the last one holds good weights); restart the learner from it",
            reason,
            self.counters.policy_version,
        )

    def _published(self, version: int) -> None:
        self.counters.policy_version = version
        self.buffer.set_policy_version(version)

    def _sync_loop(self) -> None:
        assert self._sink is not None
        while not self._stop.is_set():
            try:
                steps, episode = self._sync_work.get(timeout=SYNC_POLL_S)
            except queue.Empty:
                continue
            if self.halted is not None:
                continue
            if len(self.buffer) >= self.config.pacing.min_transitions:  # else nothing to train on yet
                self.trainer.train(self._sync.calls_for(steps), self.config.sync_train_timeout_s)
            self._publish(self._sink.publish_now)  # releases the robot of `episode`
            if self.on_trained is not None and self.halted is None:
                self.on_trained(*episode, self.counters.policy_version)

    # ---- checkpoints ----------------------------------------------------------------------------

    def _resume(self) -> bool:
        if not self.store.exists():
            return False
        ckpt = self.store.load(self.config.learning.policy_id)
        self.algorithm.load_state_dict(ckpt.algorithm)
        self.buffer.resume(ckpt.buffer)
        self.trainer.restore(ckpt.trainer)
        stored = self.buffer.info()
        self.counters = replace(ckpt.learner, env_steps=stored.transitions, episodes=stored.episodes)
        self.log.info(
            "resumed from %s: %d update calls, policy version %d, buffer %d transitions in %d episodes",
            self.store.latest,
            ckpt.trainer.update_calls,
            self.policy.version,
            stored.transitions,
            stored.episodes,
        )
        return True

    def save_checkpoint(self) -> Path:
        """Write a checkpoint; `TrainingHaltedError` once training diverged (the last checkpoint keeps good weights)."""
        if self.halted is not None:
            raise TrainingHaltedError(f"no checkpoint written: {self.halted}")
        with self.trainer.locked():
            ckpt = Checkpoint(
                algorithm=self.algorithm.state_dict(),
                buffer=self.buffer.state_dict(),
                trainer=replace(self.trainer.counters, last=dict(self.trainer.counters.last)),
                learner=replace(self.counters),
                policy_id=self.config.learning.policy_id,
            )
            path = self.store.save(ckpt)
        self._last_checkpoint = time.monotonic()
        self.log.info("checkpoint at %d update calls: %s", ckpt.trainer.update_calls, path)
        return path

    # ---- reports --------------------------------------------------------------------------------

    def report(self) -> SessionStats:
        """Counters and rates since the last report, also written as a progress row."""
        c = self.trainer.snapshot()
        now = time.monotonic()
        then, steps_then = self._last_report
        rate = (c.gradient_steps - steps_then) / max(now - then, 1e-9)
        self._last_report = (now, c.gradient_steps)
        with self._lock:
            counters = replace(self.counters)
            buffered = len(self.buffer)
        values = {
            **c.last,
            "update_calls": float(c.update_calls),
            "episodes": float(counters.episodes),
            "successes": float(counters.successes),
            "idle_fraction": self.trainer.idle_fraction(),
            "buffer_wait_fraction": self.trainer.feed_wait_fraction(),
            "publishing_halted": float(self.halted is not None),
            "updates_per_step_reached": self.ratio_reached(c.gradient_steps, counters.env_steps),
            "updates_per_step_set": self.config.pacing.updates_per_step,  # the monitor says when the learner lags
            **self.progress.recent_values(),  # return, length, success, interventions of recent online episodes
            **self.progress.episode_counts(),  # per robot, over the whole run (a monitor's counts go on from them)
        }
        self.progress.write(time.time(), c, counters, buffered, rate)
        return SessionStats(c, counters, buffered, rate, values)

    def recent_success(self) -> tuple[float | None, int]:
        """The success rate of the recent online episodes (the progress window) and how many it holds."""
        pooled, _ = self.progress.recent()
        return (None, 0) if pooled is None else (pooled.success_rate, pooled.episodes)

    @staticmethod
    def ratio_reached(gradient_steps: int, env_steps: int) -> float:
        """The update-to-data ratio so far: gradient steps per transition received (0 before any)."""
        return gradient_steps / env_steps if env_steps else 0.0

    def buffer_info(self) -> BufferInfo:
        with self._lock:
            return self.buffer.info()
