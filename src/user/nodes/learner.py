"""`learner` node: owns the persistent replay buffer, trains, publishes weights and stats.

Topics and services (names configurable):

- `/<robot>/transitions` (user/msg/Transition, RELIABLE) for every robot in `robots`: stored as they
  stream, an episode committed when its last transition arrives (`transitions_suffix`: e.g.
  `transitions/rewarded` behind a reward node), and `.../replay`: whole episodes re-sent for want of a
  receipt; each stored episode is acknowledged on `/<robot>/episode_acks`;
- `weights_topic` (user/msg/WeightChunk, latched): the policy's actor weights, versioned and chunked
  (`user.sync`), every `pacing.publish_every` update calls (async) or after each training phase (sync);
- `stats_topic` (user/msg/TrainingStats): progress every `stats_period_s`;
- `~/checkpoint` (user/srv/Checkpoint), `~/buffer_stats` (user/srv/BufferStats).

Everything lives under `run_dir`: `buffer/` (rosbag2 MCAP segments + index), `checkpoints/`,
`progress.csv` (one row per stats period, see `user.learner.progress`). With `resume: true` (the default)
a learner that finds `checkpoints/latest.pt` continues from it: policy, critics, optimisers, temperature,
sampler state and counters; the buffer on disk has every episode committed before the stop.

Modes (`pacing.mode`): `async` trains on its own thread as fast as the update-to-data ratio allows and
never makes a robot wait; `sync` trains only after an episode is stored, for exactly the updates that
episode's transitions are worth at the same ratio, then publishes, and the rollout side waits for that
version before the next episode starts (see the `rollout` node).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from user.buffer.config import BufferConfig, RateLimiterConfig
from user.buffer.replay import ReplayBuffer
from user.bus.base import RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.domain import Transition, transition_from_msg
from user.interfaces.stamps import header, now_ns
from user.learner.checkpoint import Checkpoint, CheckpointStore, LearnerCounters
from user.learner.config import LearningConfig, PacingConfig, check_batch_split
from user.learner.device import DEVICE_HELP, resolve_device
from user.learner.progress import ProgressLog
from user.learner.trainer import Trainer
from user.node.node import Node
from user.sync.publisher import WeightPublisher

JOIN_TIMEOUT_S = 10.0
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class LearnerParams:
    learner_id: str = setting("learner", "name of this learner in stats messages")
    robots: list[str] = setting([], "robot ids whose transitions are learned from")  # noqa: RUF009 - copied
    transitions_suffix: str = setting(
        "transitions", "topic under /<robot>/ to learn from (e.g. transitions/rewarded behind a reward node)"
    )
    run_dir: str = setting("runs/learner", "run directory: buffer/, checkpoints/, progress.csv")
    resume: bool = setting(True, "continue from run_dir/checkpoints/latest.pt when it exists")
    learning: LearningConfig = setting(LearningConfig(), "policy and algorithm")  # noqa: RUF009 - frozen
    pacing: PacingConfig = setting(PacingConfig(), "update-to-data ratio, mode, publication")  # noqa: RUF009
    buffer: BufferConfig = setting(  # noqa: RUF009 - frozen
        BufferConfig(), "the persistent buffer (batch size and rate limiter are set from learning/pacing)"
    )
    weights_topic: str = setting("/policy/weights", "where weights are published")
    stats_topic: str = setting("/learner/stats", "where training stats are published")
    stats_period_s: float = setting(1.0, "stats message and progress row period, s", min=0.05)
    checkpoint_period_s: float = setting(
        60.0, "checkpoint at most this often while training, s; 0 = only at exit", min=0.0
    )
    keep_checkpoints: int = setting(3, "numbered checkpoints kept beside latest.pt", min=1)
    torch_threads: int = setting(0, "torch CPU threads; 0 = torch's default", min=0)
    device: str = setting("cpu", DEVICE_HELP)
    sync_train_timeout_s: float = setting(600.0, "sync mode: longest training phase, s", min=1.0)

    def __post_init__(self) -> None:
        if not self.robots:
            raise ConfigError("robots: list at least one robot id to learn from")


class LearnerNode(Node):
    """Buffer + trainer + weight publisher + checkpoints; bus callbacks only store transitions."""

    Params = LearnerParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(LearnerParams)
        learning, pacing = p.learning, p.pacing
        check_batch_split(learning)
        if p.torch_threads:
            torch.set_num_threads(p.torch_threads)
        self.run_dir = Path(p.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.buffer = ReplayBuffer.open(self.run_dir / "buffer", self._buffer_config())
        self.policy = learning.build_policy().to(resolve_device(p.device))
        self.algorithm = learning.build_algorithm(self.policy)
        self.counters = LearnerCounters()
        self.store = CheckpointStore(self.run_dir / "checkpoints", p.keep_checkpoints)
        self.trainer = Trainer(
            self.algorithm,
            self.buffer,
            learning.state_selector(),
            sample_timeout_s=pacing.sample_timeout_s,
            after_update=self._after_update,
        )
        self.resumed = self._resume() if p.resume else False
        self.publisher = WeightPublisher(
            self,
            self.policy,
            policy_id=learning.policy_id,
            topic=p.weights_topic,
            every_k_updates=pacing.publish_every if pacing.mode == "async" else 1_000_000_000,
            dtype=DTYPES[pacing.weight_dtype],
        )
        self.publisher.publish_now()  # version 1 (or the resumed version + 1): rollout can act at once
        self.counters.policy_version = self.publisher.version
        self.progress = ProgressLog(self.run_dir)
        self._stats_pub = self.create_publisher(p.stats_topic, "user/msg/TrainingStats", RELIABLE)
        self._lock = threading.Lock()  # counters and buffer writes (bus thread) vs. stats (timer)
        self._last_checkpoint = time.monotonic()
        self._last_stats = (time.monotonic(), self.trainer.counters.gradient_steps)
        self._sync_work: queue.Queue[int] = queue.Queue()
        self._steps_since_train = 0
        self._stop = threading.Event()
        self.rejected = 0  # transitions that could not be stored (logged with the reason)
        self._acks = {r: self.create_publisher(f"/{r}/episode_acks", "user/msg/EpisodeAck", RELIABLE) for r in p.robots}
        self._replays: dict[tuple[str, int], list[Transition]] = {}  # re-sent episodes being received
        self.replayed_episodes = 0  # episodes stored from a robot's re-send (missed live)
        for robot in p.robots:
            self.create_subscription(f"/{robot}/{p.transitions_suffix}", "user/msg/Transition", self._on_transition)
            self.create_subscription(f"/{robot}/{p.transitions_suffix}/replay", "user/msg/Transition", self._on_replay)
        self.create_service(f"/{self.name}/checkpoint", "user/srv/Checkpoint", self._on_checkpoint)
        self.create_service(f"/{self.name}/buffer_stats", "user/srv/BufferStats", self._on_buffer_stats)
        self.create_timer(p.stats_period_s, self._publish_stats)
        self._sync_thread: threading.Thread | None = None
        if pacing.mode == "async":
            self.trainer.start_async()
        else:
            self._sync_thread = threading.Thread(target=self._sync_loop, name="learner-sync", daemon=True)
            self._sync_thread.start()
        self.log.info(
            "learning %s (%s, %s) from %s; buffer %d transitions; policy version %d%s",
            learning.policy_id,
            learning.algorithm,
            pacing.mode,
            ", ".join(p.robots),
            len(self.buffer),
            self.publisher.version,
            f"; resumed at {self.trainer.counters.update_calls} updates" if self.resumed else "",
        )

    def _buffer_config(self) -> BufferConfig:
        p = self.params
        learning, pacing = p.learning, p.pacing
        if pacing.mode == "async":  # the limiter enforces the ratio: samples per insert = rows per gradient step x UTD
            rows_per_step = learning.batch_size / learning.gradient_steps_per_update
            spi = pacing.updates_per_step * rows_per_step
        else:  # sync: training phases are sized explicitly
            spi = 0.0
        limiter = RateLimiterConfig(
            samples_per_insert=spi,
            min_size=pacing.min_transitions,
            error_buffer=max(p.buffer.rate_limiter.error_buffer, float(learning.batch_size)),
        )
        sampler = p.buffer.sampler
        if learning.algorithm == "rlpd" and sampler.kind == "uniform":
            sampler = replace(sampler, kind="demo_ratio", demo_ratio=learning.rlpd.demo_ratio)
        if learning.algorithm == "hg_dagger" and sampler.kind == "uniform":
            sampler = replace(sampler, kind="intervention")
        prefetch = p.buffer.prefetch if pacing.mode == "async" else 0  # sync: every batch sees the newest episode
        return replace(
            p.buffer, rate_limiter=limiter, sampler=sampler, batch_size=learning.batch_size, prefetch=prefetch
        )

    # ---- resume and checkpoints -------------------------------------------------------------------

    def _resume(self) -> bool:
        if not self.store.exists():
            return False
        ckpt = self.store.load(self.params.learning.policy_id)
        self.algorithm.load_state_dict(ckpt.algorithm)
        self.buffer.sampler.load_state_dict(ckpt.buffer["sampler"])
        limiter = dict(ckpt.buffer["rate_limiter"])
        limiter.update(
            inserts=len(self.buffer),  # episodes committed after the checkpoint count too
            samples_per_insert=self.buffer.rate_limiter.samples_per_insert,
            min_size=self.buffer.rate_limiter.min_size,
        )
        self.buffer.rate_limiter.load_state_dict(limiter)
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
        with self.trainer.locked():
            ckpt = Checkpoint(
                algorithm=self.algorithm.state_dict(),
                buffer={
                    "sampler": self.buffer.sampler.state_dict(),
                    "rate_limiter": self.buffer.rate_limiter.state_dict(),
                },
                trainer=replace(self.trainer.counters, last=dict(self.trainer.counters.last)),
                learner=replace(self.counters),
                policy_id=self.params.learning.policy_id,
            )
            path = self.store.save(ckpt)
        self._last_checkpoint = time.monotonic()
        self.log.info("checkpoint at %d update calls: %s", ckpt.trainer.update_calls, path)
        return path

    def _after_update(self, calls: int) -> None:
        """Training thread, after each update call."""
        version = self.publisher.after_update()
        if version is not None:
            self.counters.policy_version = version
            self.buffer.set_policy_version(version)
        period = self.params.checkpoint_period_s
        if period > 0 and time.monotonic() - self._last_checkpoint >= period:
            self.save_checkpoint()

    # ---- data in --------------------------------------------------------------------------------

    def _on_transition(self, msg: Any) -> None:
        try:
            transition = transition_from_msg(msg)
            with self._lock:
                episode = self.buffer.add(transition)
                self.counters.env_steps += 1
                self._steps_since_train += 1
                if episode is not None:
                    self.counters.episodes += 1
                    self.counters.successes += int(transition.success)
        except Exception as exc:  # a transition the buffer refuses (gap in steps, wrong shape ...): say why
            self.rejected += 1
            self.log.error("transition from %s refused: %s", getattr(msg, "robot_id", "?"), exc)
            return
        if episode is not None:
            self._acknowledge(transition.robot_id, transition.episode_id)
        if episode is not None and self.params.pacing.mode == "sync":
            with self._lock:
                steps, self._steps_since_train = self._steps_since_train, 0
            self._sync_work.put(steps)

    def _on_replay(self, msg: Any) -> None:
        """A robot re-sends an episode it has no receipt for: store it unless it is stored already."""
        try:
            transition = transition_from_msg(msg)
        except Exception as exc:
            self.rejected += 1
            self.log.error("re-sent transition refused: %s", exc)
            return
        key = (transition.robot_id, transition.episode_id)
        if transition.step == 0:
            self._replays[key] = []
        steps = self._replays.setdefault(key, [])
        steps.append(transition)
        if not transition.done:
            return
        del self._replays[key]
        with self._lock:
            if self.buffer.has_episode(*key):
                stored = False
            else:
                try:
                    self.buffer.add_episode(steps)
                except Exception as exc:  # incomplete re-send (a message lost): no receipt, the robot tries again
                    self.log.warning("re-sent episode %s/%d not stored: %s", key[0], key[1], exc)
                    return
                stored = True
                self.replayed_episodes += 1
                self.counters.episodes += 1
                self.counters.env_steps += len(steps)
                self.counters.successes += int(steps[-1].success)
        if stored:
            self.log.info("stored re-sent episode %d of %s (%d steps)", key[1], key[0], len(steps))
        self._acknowledge(*key)

    def _acknowledge(self, robot_id: str, episode_id: int) -> None:
        pub = self._acks.get(robot_id)
        if pub is None:
            return
        pub.publish(
            self.codec.msg_class("user/msg/EpisodeAck")(
                header=header(now_ns(), "", self.codec),
                robot_id=robot_id,
                episode_id=episode_id,
                stored=True,
                message="",
            )
        )

    # ---- sync mode ------------------------------------------------------------------------------

    def _sync_loop(self) -> None:
        learning, pacing = self.params.learning, self.params.pacing
        owed = 0.0
        while not self._stop.is_set():
            try:
                steps = self._sync_work.get(timeout=0.2)
            except queue.Empty:
                continue
            if len(self.buffer) < pacing.min_transitions:
                version = self.publisher.publish_now()  # nothing to train on yet: release the robots
                self.counters.policy_version = version
                continue
            owed += pacing.updates_per_step * steps / learning.gradient_steps_per_update
            calls = int(owed)
            owed -= calls
            self.trainer.train(calls, self.params.sync_train_timeout_s)
            version = self.publisher.publish_now()
            self.counters.policy_version = version
            self.buffer.set_policy_version(version)

    # ---- reports --------------------------------------------------------------------------------

    def _publish_stats(self) -> None:
        if self._stop.is_set():
            return  # shutting down: the progress files are being closed
        c = self.trainer.snapshot()
        now = time.monotonic()
        then, steps_then = self._last_stats
        rate = (c.gradient_steps - steps_then) / max(now - then, 1e-9)
        self._last_stats = (now, c.gradient_steps)
        with self._lock:
            counters = replace(self.counters)
            buffered = len(self.buffer)
        values = {
            **c.last,
            "update_calls": float(c.update_calls),
            "episodes": float(counters.episodes),
            "successes": float(counters.successes),
            "idle_fraction": self.trainer.idle_fraction(),
        }
        self._stats_pub.publish(
            self.codec.msg_class("user/msg/TrainingStats")(
                header=header(now_ns(), "", self.codec),
                learner_id=self.params.learner_id,
                updates=c.gradient_steps,
                policy_version=counters.policy_version,
                buffer_transitions=buffered,
                env_steps=counters.env_steps,
                updates_per_second=rate,
                names=list(values),
                values=np.asarray(list(values.values()), dtype=np.float32),
            )
        )
        self.progress.write(time.time(), c, counters, buffered, rate)

    def _on_checkpoint(self, request: Any) -> Any:
        del request
        response = self.codec.msg_class("user/srv/Checkpoint_Response")
        try:
            path = self.save_checkpoint()
        except Exception as exc:
            return response(success=False, message=str(exc), path="", updates=0)
        return response(success=True, message="", path=str(path), updates=self.trainer.counters.gradient_steps)

    def _on_buffer_stats(self, request: Any) -> Any:
        del request
        with self._lock:
            info = self.buffer.info()
        return self.codec.msg_class("user/srv/BufferStats_Response")(
            success=True,
            message=str(info.directory),
            transitions=info.transitions,
            episodes=info.episodes,
            demo_transitions=info.demo_transitions,
            intervened_transitions=info.intervened_transitions,
            bytes_on_disk=info.bytes_on_disk,
            success_rate=info.success_rate,
        )

    def destroy(self) -> None:
        if self._stop.is_set():
            return  # destroyed already
        started = time.monotonic()
        self._stop.set()
        if not self.trainer.stop(JOIN_TIMEOUT_S):
            self.log.error("training thread did not stop within %.1f s", JOIN_TIMEOUT_S)
        if self._sync_thread is not None:
            self._sync_thread.join(JOIN_TIMEOUT_S)
        try:
            self.save_checkpoint()
        finally:
            self.publisher.close()
            self.progress.close()
            with self._lock:
                self.buffer.close()
            self.log.info("learner shut down in %.2f s", time.monotonic() - started)
