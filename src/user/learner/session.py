"""`LearningSession`: the learner's ROS-free core. It owns the persistent buffer, the policy and algorithm, the
training loop (async thread or sync phases), checkpoints and resume, counters and progress; the `learner`
node only wires topics and services to it, as the robot node does over `ControlLoop`.

Weights leave through a `WeightSink` (the node's `WeightPublisher`), made after the session because it
publishes the session's policy; `start(sink)` publishes the first version and starts training. Training that
diverges halts publication for good (`user.learner.publication`): robots keep the last good version, no
checkpoint overwrites the last good one (`TrainingHaltedError`), and the stats carry `publishing_halted`.
Sync mode trains in phases, one per stored episode (`user.learner.sync_phases`). A learner with ranks writes DCP
checkpoints together with them (`user.learner.rank_checkpoint`); a resume takes the newest of either format.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from user.algorithms.base import TrainingStats
from user.buffer.batch import TransitionBatch
from user.buffer.info import BufferInfo
from user.buffer.replay import ReplayBuffer
from user.distributed.commands import Op
from user.distributed.current import this_rank
from user.interfaces.domain import Transition
from user.learner import rank_checkpoint
from user.learner.checkpoint import Checkpoint, CheckpointStore, CheckpointWriteError, LearnerCounters
from user.learner.config import check_batch_split, check_chunk_horizon
from user.learner.device import resolve_device
from user.learner.progress import ProgressLog
from user.learner.publication import Publication, WeightSink
from user.learner.ranked_update import RankedUpdate, lead_gather
from user.learner.session_config import SessionConfig, learner_buffer_config
from user.learner.session_report import ratio_reached, run_success, stats_values
from user.learner.speed import speed_plan
from user.learner.sync_phases import Episode, SyncPhases, SyncSchedule
from user.learner.trainer import Trainer, TrainerCounters

JOIN_TIMEOUT_S = 10.0


class TrainingHaltedError(RuntimeError):
    """Training diverged (a loss or weight is not finite): nothing is published or checkpointed any more."""


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
        check_chunk_horizon(config.learning, config.buffer)
        self.config = config
        self.log = log or logging.getLogger("user.learner.session")
        self.run_dir = run_dir = Path(config.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        learning = config.learning
        self.conditioner = learning.conditioner()  # one policy for several tasks: batches of conditioned states
        self.buffer = ReplayBuffer.open(
            run_dir / "buffer",
            learner_buffer_config(learning, config.pacing, config.buffer),
            read_as=self.conditioner.transition if self.conditioner is not None else None,
        )
        self.rank = this_rank()  # one of a learner's ranks (the lead: this process talks on the Bus), or None
        device = self.rank.group.device if self.rank is not None else resolve_device(config.device)
        self.policy = learning.build_policy().to(device)
        self.algorithm = learning.build_algorithm(self.policy)
        self.counters = LearnerCounters()
        self.store = CheckpointStore(run_dir / "checkpoints", config.keep_checkpoints)
        speed = speed_plan(config.speed, self.policy.device)
        self.log.info("training on %s: %s", self.policy.device, speed.describe())
        self.trainer = Trainer(
            self.algorithm,
            self.buffer,
            learning.state_selector(),
            sample_timeout_s=config.pacing.sample_timeout_s,
            after_update=self._after_update,
            speed=speed,
            ranked=self._ranked_update if self.rank is not None else None,
        )
        self._ranked: RankedUpdate | None = None
        self._lock = threading.Lock()  # counters and buffer writes (bus threads) vs. reports
        self._sink: WeightSink | None = None
        self._last_checkpoint = time.monotonic()
        self.on_trained: Callable[[str, int, int], None] | None = None  # sync: (robot, episode, first version
        # trained on it), once that version is published; a rollout waits for it before the robot's next episode
        self._sync = SyncSchedule(config.pacing.updates_per_step, learning.gradient_steps_per_update)
        self._stop = threading.Event()
        self.phases = SyncPhases(self._sync_phase, self._stop)  # sync mode: a training phase per stored episode
        self._steps_since_train = 0
        self.publication = Publication(self.log, lambda: self.counters.policy_version)  # halted once training diverges
        self.resumed = self._resume() if config.resume else False
        if self.rank is not None:
            self._ranked = self._start_ranks()
        self._last_report = (time.monotonic(), self.trainer.counters.gradient_steps)
        self.progress = ProgressLog(  # episodes stored: shown
            run_dir, config.curve_period_s or math.inf, self.buffer.storage.index, tensorboard=config.tensorboard
        )

    # ---- life -----------------------------------------------------------------------------------

    def start(self, sink: WeightSink) -> int:
        """Publish the first version (the resumed one + 1) so robots can act at once, then start training."""
        self._sink = sink
        self.counters.policy_version = sink.publish_now()
        if self.config.pacing.mode == "async":
            self.trainer.start_async()
        else:
            self.phases.start()
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
        self.log.info(
            "update-to-data ratio reached: %.3f gradient steps per transition (set %.3f), %d gradient steps over %d "
            "transitions",
            ratio_reached(c.gradient_steps, self.counters.env_steps),
            self.config.pacing.updates_per_step,
            c.gradient_steps,
            self.counters.env_steps,
        )
        self.phases.join(JOIN_TIMEOUT_S)
        try:
            if self.halted is None:
                self.save_checkpoint()
            else:
                self.log.error("no final checkpoint: %s", self.halted)
        except CheckpointWriteError as exc:
            self.log.error("no final checkpoint: %s", exc)
        finally:
            if self.rank is not None and self.rank.channel is not None:
                self.rank.channel.close()  # the other ranks stop, after they wrote their part of the checkpoint
            self.progress.close()
            with self._lock:
                self.buffer.close()

    # ---- data in --------------------------------------------------------------------------------

    def add(self, transition: Transition, payload: bytes | None = None) -> int | None:
        """Store one streamed transition; returns the buffer's episode number when it completed an episode.
        `payload`: its CDR bytes as received, stored as they are when given (see `ReplayBuffer.add`).
        Raises what the buffer raises for a transition it refuses (nothing is counted then), and
        `TaskConditionError` for one the task-conditioned policy cannot take (nothing stored)."""
        if self.conditioner is not None:  # refused before it is stored: the buffer reads it conditioned
            self.conditioner.check([transition])
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

    def _queue_training(self, steps: int, episode: Episode) -> None:
        if self.config.pacing.mode == "sync":  # a training phase per stored episode
            self.phases.put(steps, episode)

    def add_episode(self, steps: list[Transition], payloads: Sequence[bytes | None] | None = None) -> bool:
        """Store a whole re-sent episode unless it is stored already; False when it was. `payloads`: the
        steps' CDR bytes as received, where they can be stored as they are (see `ReplayBuffer.add_episode`)."""
        if self.conditioner is not None:
            self.conditioner.check(steps)
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
        if not self.publication.check(calls, self.trainer.counters.last):
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

    def _publish(self, publish: Callable[[], int | None]) -> None:
        """Publish through the sink unless halted; the version published is counted and known to the sampler."""
        version = self.publication.publish(publish)
        if version is not None:
            self.counters.policy_version = version
            self.buffer.set_policy_version(version)

    @property
    def halted(self) -> str | None:
        """Why weights are no longer published (training diverged), if they are not."""
        return self.publication.halted

    def _sync_phase(self, steps: int, episode: Episode) -> None:
        """Sync mode, after `episode` (of `steps` env steps) was stored: train for what it is worth, publish (which
        releases its robot), then say which version was trained on it."""
        if self.halted is not None or self._sink is None:
            return
        if len(self.buffer) >= self.config.pacing.min_transitions:  # else nothing to train on yet
            self.trainer.train(self._sync.calls_for(steps), self.config.sync_train_timeout_s)
        self._publish(self._sink.publish_now)  # releases the robot of `episode`
        if self.on_trained is not None and self.halted is None:
            self.on_trained(*episode, self.counters.policy_version)

    # ---- ranks ----------------------------------------------------------------------------------

    def _start_ranks(self) -> RankedUpdate:
        """Every rank takes this (the lead's) state, resumed or new; from now on updates are made together."""
        assert self.rank is not None and self.rank.channel is not None
        with self.rank.channel.command(Op.START):
            ranked = RankedUpdate(self.algorithm, self.rank.group, self.config.ranks)
        if ranked.sharded:  # publication gathers the actor's shards from every rank first
            self.policy.gather_with(lead_gather(ranked, self.rank.channel))
        env = self.rank.group.env
        self.log.info("training on %d ranks (this one, rank %d, talks on the Bus)", env.world_size, env.rank)
        return ranked

    def _ranked_update(self, batch: TransitionBatch) -> TrainingStats:
        assert self.rank is not None and self.rank.channel is not None and self._ranked is not None
        with self.rank.channel.command(Op.UPDATE):
            return self._ranked.update(batch)

    # ---- checkpoints ----------------------------------------------------------------------------

    def _resume(self) -> bool:
        found = rank_checkpoint.newest(self.store)
        if found is None:
            return False
        ckpt = rank_checkpoint.read(found, self.store, self.config.learning.policy_id)
        self.algorithm.load_state_dict(ckpt.algorithm)
        self.buffer.resume(ckpt.buffer)
        self.trainer.restore(ckpt.trainer)
        stored = self.buffer.info()
        self.counters = replace(ckpt.learner, env_steps=stored.transitions, episodes=stored.episodes)
        self.log.info(
            "resumed from %s: %d update calls, policy version %d, buffer %d transitions in %d episodes",
            found,
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
        sharded = None if self._ranked is None else self._ranked.sharded  # None: no ranks
        with self.trainer.locked():
            ckpt = Checkpoint(
                algorithm=self.algorithm.state_dict() if sharded is None else {},  # with ranks: each rank's own
                buffer=self.buffer.state_dict(),
                trainer=replace(self.trainer.counters, last=dict(self.trainer.counters.last)),
                learner=replace(self.counters),
                policy_id=self.config.learning.policy_id,
            )
            path = rank_checkpoint.write(ckpt, self.algorithm, self.store, self.rank, sharded=sharded)
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
        halted, per_step = self.halted is not None, self.config.pacing.updates_per_step
        values = stats_values(
            c, counters, self.trainer, self.progress, self.buffer, halted=halted, updates_per_step=per_step
        )
        self.progress.write(time.time(), c, counters, buffered, rate)
        return SessionStats(c, counters, buffered, rate, values)

    def recent_success(self) -> tuple[float | None, int]:
        """How good the run is now (`session_report.run_success`): a success rate and the episodes it is over."""
        return run_success(self.progress, self.conditioner)

    def buffer_info(self) -> BufferInfo:
        with self._lock:
            return self.buffer.info()
