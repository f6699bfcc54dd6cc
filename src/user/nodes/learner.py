"""`learner` node: owns the persistent replay buffer, trains, publishes weights and stats.

Topics and services (names configurable):

- `/<robot>/transitions` (user/msg/Transition, RELIABLE) for every robot in `robots`, and for every robot that
  joins while the run goes on (`admit`: patterns of announced robots that may join when they fit the policy; one
  whose announcement has been gone `leave_after_s` is dropped, see `user.fleet`): stored as they
  stream, an episode committed when its last transition arrives (`transitions_suffix`: e.g.
  `transitions/rewarded` behind a reward node), and `.../replay`: whole episodes re-sent for want of a
  receipt; each stored episode is acknowledged on `/<robot>/episode_acks`. A transition's CDR bytes go
  into the buffer as they arrived (no decode/encode round trip) when they are exactly what encoding it
  would give (`is_canonical_transition`), else the buffer encodes the decoded transition;
- `/<robot>/episode_events` (user/msg/EpisodeEvent): the END of an episode that had no done step (an
  operator reset) stores it with its last step truncated;
- every transition and event is checked at the door (`user.learner.intake`, the rules of `user.interfaces.validate`:
  finite values, actions in [-1, 1] of the policy's dimension, ids in range, the topic's robot) before the buffer
  sees it; a refused one is counted per cause and logged (rate-limited, `refusals`) and never touches the robot's
  episode in progress;
- `weights_topic` (user/msg/WeightChunk, latched): the policy's actor weights, versioned and chunked
  (`user.sync`), every `pacing.publish_every` update calls (async) or after each training phase (sync), each
  chunk naming `learner_id`; never weights that are not finite, and nothing more once a training loss was
  not finite (the session halts publication with one error line, see `user.learner.publication`); with
  `weight_link.port`, every version also goes to co-located rollouts (`weights_from: link`) over torch.distributed
  (`user.sync.weight_link`);
- `stats_topic` (user/msg/TrainingStats): progress every `stats_period_s`;
- `~/checkpoint` (user/srv/Checkpoint), `~/buffer_stats` (user/srv/BufferStats).

Everything lives under `run_dir`: `buffer/` (rosbag2 MCAP segments + index), `checkpoints/`,
`progress.csv` (one row per stats period, see `user.learner.progress`). With `resume: true` (the default)
a learner that finds `checkpoints/latest.pt` continues from it: policy, critics, optimisers, temperature,
sampler state and counters; the buffer on disk has every episode committed before the stop.

Modes (`pacing.mode`): `async` trains on its own thread as fast as the update-to-data ratio allows and
never makes a robot wait; `sync` trains only after an episode is stored, for exactly the updates that
episode's transitions are worth at the same ratio, then publishes, and sends the episode's robot a second
receipt naming that version (`policy_version`); the rollout side waits for that receipt and that version
before the robot's next episode starts (see the `rollout` node), whatever order the messages arrive in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from user.buffer.frames.frame_decode import usable_cores
from user.bus.base import BEST_EFFORT, RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.fleet import PolicySpec, fleet_summary, watch_fleet
from user.fleet.settings import ADMIT_HELP, DEFAULT_LEAVE_AFTER_S, LEAVE_HELP
from user.interfaces.domain import Transition, is_canonical_transition
from user.interfaces.episode_events import EpisodeKind
from user.interfaces.refusals import Refusals
from user.interfaces.stamps import header
from user.learner.data_credit import DataCredit
from user.learner.device import THREADS_HELP, training_threads
from user.learner.health import LearnerHealth
from user.learner.intake import Door, ResentEpisodes
from user.learner.session import LearningSession
from user.learner.session_config import SessionConfig
from user.learner.stop_after import RunEnding, StopAfter
from user.nodes.parts.learner_services import serve
from user.runtime.diagnostics import Status
from user.runtime.node import Node, TypedPublisher
from user.sync.chunking import DTYPES
from user.sync.publisher import WeightPublisher
from user.sync.weight_link import LinkServe, link_sender

CREDIT_PERIOD_S = 0.05  # how often the data credit goes out (robots may run `credit_tolerance` ahead)


@dataclass(frozen=True)
class LearnerParams(SessionConfig):
    """The session's settings (`SessionConfig`: run_dir, resume, learning, pacing, buffer, checkpoints, device) and
    how the node wires it: robots and topics, stats, the data credit, when the run ends."""

    learner_id: str = setting(
        "learner", "name of this learner in stats messages and weight chunks (a rollout's `weights_publisher`)"
    )
    robots: list[str] = setting([], "robot ids whose transitions are learned from (from the start to the end)")
    admit: list[str] = setting([], ADMIT_HELP)
    leave_after_s: float = setting(DEFAULT_LEAVE_AFTER_S, LEAVE_HELP, min=0.0)
    transitions_suffix: str = setting(
        "transitions", "topic under /<robot>/ to learn from (e.g. transitions/rewarded behind a reward node)"
    )
    weights_topic: str = setting("/policy/weights", "where weights are published")
    weight_link: LinkServe = setting(
        LinkServe(), "weights to rollouts on this machine over torch.distributed too (port 0: off, Bus only)"
    )
    stats_topic: str = setting("/learner/stats", "where training stats are published")
    stats_period_s: float = setting(1.0, "stats message and progress row period, s", min=0.05)
    torch_threads: int = setting(0, THREADS_HELP, min=0)
    credit_topic: str = setting(
        "/data_credit",
        "async: publish the data credit here, so that robots that are not real time (sim, gym) wait while they are "
        "ahead of the update-to-data ratio and the set ratio is the one reached (user.learner.data_credit); empty: "
        "never hold them (the learner then falls behind robots faster than it)",
    )
    stop_after: StopAfter = setting(
        StopAfter(), "end the run when one of these is reached: final checkpoint, then every node stops (exit 0)"
    )
    credit_tolerance: int = setting(
        256, "async: transitions robots may run ahead of the update-to-data ratio before they wait", min=1
    )

    def __post_init__(self) -> None:
        if not self.robots and not self.admit:
            raise ConfigError("robots: list at least one robot id to learn from (or admit: robots that may join)")


class LearnerNode(Node):
    """Wires a `LearningSession` to the bus: transitions in, acknowledgements, weights, stats and services out."""

    Params = LearnerParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(LearnerParams)
        torch.set_num_threads(training_threads(p.torch_threads, usable_cores()))
        self.session = LearningSession(p, self.log)  # the params are the session's settings and the node's own
        self.health = LearnerHealth(self.name, self.session)  # /diagnostics: training idle or not, the disk
        self.publisher = self._weight_publisher(p)
        self._stats_pub = self.create_publisher(p.stats_topic, "user/msg/TrainingStats", RELIABLE)
        self._started = time.monotonic()  # stop_after.wall_time_s counts from here
        self.ending: RunEnding | None = None  # a stop_after condition was met: the gradient steps owed, then the end
        self.credit: DataCredit | None = None  # async: what robots that can wait may still send
        self.rejected = 0  # valid transitions the buffer could not store (logged with the reason)
        self.refusals = Refusals(self.log)  # messages refused at the door, per cause (see user.interfaces.validate)
        self.door = Door(self.refusals, self.session.policy.action_dim)
        self._acks: dict[str, TypedPublisher] = {}  # robot -> its receipts
        self._resends = ResentEpisodes()  # re-sent episodes being received
        self.replayed_episodes = 0  # episodes stored from a robot's re-send (missed live)
        for robot in p.robots:
            self._open_robot(robot)
        spec = PolicySpec.of(p.learning, self.session.policy.action_dim)
        # robots joining and leaving while the run goes on (`admit`); one that leaves gets no more receipts
        self.fleet = watch_fleet(self, p, spec, self._open_robot, lambda robot: self._acks.pop(robot, None))
        serve(self, self.session)  # ~/checkpoint, ~/buffer_stats
        self.create_timer(p.stats_period_s, self._publish_stats)
        if p.pacing.mode == "sync":  # a second receipt: the version trained on the episode (the rollout waits for it)
            self.session.on_trained = self._acknowledge
        elif p.credit_topic:
            self._start_credit()
        version = self.session.start(self.publisher)
        self.log.info(
            "learning %s (%s, %s) from %s; buffer %d transitions; policy version %d%s",
            p.learning.policy_id,
            p.learning.algorithm,
            p.pacing.mode,
            fleet_summary(p.robots, p.admit),
            len(self.session.buffer),
            version,
            f"; resumed at {self.session.trainer.counters.update_calls} updates" if self.session.resumed else "",
        )

    # ---- data in --------------------------------------------------------------------------------

    def _stored_bytes(self, msg: Any, payload: bytes) -> bytes | None:
        """The received bytes when the buffer can store them as they are (nothing here changes a transition,
        and they are what encoding it would give), else None: the buffer encodes the transition itself."""
        return payload if is_canonical_transition(msg, payload, self.codec) else None

    def _open_robot(self, robot: str) -> list[Any]:
        """Subscribe `robot`'s transitions, re-sends and episode events, and publish its receipts; the handles."""
        p = self.params
        self._acks[robot] = self.create_publisher(f"/{robot}/episode_acks", "user/msg/EpisodeAck", RELIABLE)
        live, replay = f"/{robot}/{p.transitions_suffix}", f"/{robot}/{p.transitions_suffix}/replay"
        events = partial(self._on_episode_event, robot)
        return [
            self._acks[robot],
            self.create_payload_subscription(live, "user/msg/Transition", partial(self._on_transition, robot, live)),
            self.create_payload_subscription(replay, "user/msg/Transition", partial(self._on_replay, robot, replay)),
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", events),
        ]

    def _taken(self, robot: str, transition: Transition | None) -> Transition | None:
        """`transition` unless it is of a robot that joined at run time and no longer served, or does not fit."""
        if transition is None or self.fleet is None or self.fleet.takes(robot, transition):
            return transition
        return None

    def _on_transition(self, robot: str, topic: str, msg: Any, payload: bytes) -> None:
        transition = self._taken(robot, self.door.transition(robot, topic, msg))
        if transition is None:
            return  # never handed to the buffer: the robot's episode in progress is left as it was
        try:
            episode = self.session.add(transition, self._stored_bytes(msg, payload))
        except Exception as exc:  # a transition the buffer refuses (gap in steps, wrong shape ...): say why
            self.rejected += 1
            self.refusals.refuse(
                f"buffer {type(exc).__name__}", f"transition of {robot} episode {transition.episode_id}: {exc}"
            )
            return
        if episode is not None:
            self._acknowledge(transition.robot_id, transition.episode_id)

    def _on_episode_event(self, robot: str, msg: Any) -> None:
        """An END without a done step (an operator reset) ends the robot's episode: stored, last step truncated."""
        event = self.door.episode_event(robot, msg)
        if event is None or event.kind != EpisodeKind.END:
            return
        if self.fleet is not None and not self.fleet.static(robot) and not self.fleet.roster.serves(robot):
            return
        try:
            episode = self.session.end_episode(robot, event.episode_id, event.steps)
        except Exception as exc:
            self.rejected += 1
            self.log.error("episode %d of %s could not be ended: %s", event.episode_id, robot, exc)
            return
        if episode is not None:
            self.log.info(
                "episode %d of %s ended by a reset after %d steps: stored truncated",
                event.episode_id,
                robot,
                event.steps,
            )
            self._acknowledge(robot, event.episode_id)

    def _on_replay(self, robot: str, topic: str, msg: Any, payload: bytes) -> None:
        """A robot re-sends an episode it has no receipt for: store it unless it is stored already."""
        transition = self._taken(robot, self.door.transition(robot, topic, msg))
        replay = None if transition is None else self._resends.add(transition, self._stored_bytes(msg, payload))
        if transition is None or replay is None:
            return  # refused at the door, or the episode is not whole yet
        key = (transition.robot_id, transition.episode_id)
        try:
            stored = self.session.add_episode(replay.steps, replay.payloads)
        except Exception as exc:  # incomplete re-send (a message lost): no receipt, the robot tries again
            self.log.warning("re-sent episode %s/%d not stored: %s", key[0], key[1], exc)
            return
        if stored:
            self.replayed_episodes += 1
            self.log.info("stored re-sent episode %d of %s (%d steps)", key[1], key[0], len(replay.steps))
        self._acknowledge(*key)

    def _acknowledge(self, robot_id: str, episode_id: int, policy_version: int = 0) -> None:
        pub = self._acks.get(robot_id)
        if pub is None:
            return
        pub.publish(
            self.codec.msg_class("user/msg/EpisodeAck")(
                header=header(self.now_ns(), "", self.codec),
                robot_id=robot_id,
                episode_id=episode_id,
                stored=True,
                message="",
                policy_version=policy_version,
            )
        )

    # ---- reports --------------------------------------------------------------------------------

    def _weight_publisher(self, p: LearnerParams) -> WeightPublisher:
        dtype, policy = DTYPES[p.pacing.weight_dtype], self.session.policy
        link = link_sender(p.weight_link, p.learning.policy_id, policy, dtype, self.log)
        return WeightPublisher(
            self,
            self.session.policy,
            policy_id=p.learning.policy_id,
            topic=p.weights_topic,
            every_k_updates=p.pacing.publish_every if p.pacing.mode == "async" else None,  # sync: after each phase
            dtype=dtype,
            publisher=p.learner_id,
            delta=p.pacing.weight_delta,
            keyframe_every=p.pacing.keyframe_every,
            link=link,
        )

    def _start_credit(self) -> None:
        """Async: the data credit, counted from now (data already stored, a resumed run or demos, is not owed)."""
        p, session = self.params, self.session
        limiter, received = session.buffer.rate_limiter, session.counters.env_steps
        self.credit = DataCredit(limiter, p.credit_tolerance, session.buffer.config.batch_size, received)
        self._credit_pub = self.create_publisher(p.credit_topic, "user/msg/DataCredit", BEST_EFFORT)
        self.create_timer(CREDIT_PERIOD_S, self._publish_credit)

    def _publish_credit(self) -> None:
        credit = self.credit.credit(self.session.counters.env_steps) if self.credit is not None else None
        if credit is None or self.session.stopped:
            return
        self._credit_pub.publish(
            self.codec.msg_class("user/msg/DataCredit")(
                header=header(self.now_ns(), "", self.codec),
                learner_id=self.params.learner_id,
                credit=0 if self.ending is not None else credit,  # the run is ending: no more data is owed
                updates_per_step=self.params.pacing.updates_per_step,
            )
        )

    def _publish_stats(self) -> None:
        if self.session.stopped:
            return  # shutting down: the progress files are being closed
        r = self.session.report()
        failure = self.health.failure()  # training stopped or diverged: the process ends as failed
        if failure is not None:
            self.fail(failure)
        self._check_complete()
        self._stats_pub.publish(
            self.codec.msg_class("user/msg/TrainingStats")(
                header=header(self.now_ns(), "", self.codec),
                learner_id=self.params.learner_id,
                updates=r.trainer.gradient_steps,
                policy_version=r.counters.policy_version,
                buffer_transitions=r.buffered,
                env_steps=r.counters.env_steps,
                updates_per_second=r.gradient_steps_per_s,
                names=list(r.values),
                values=np.asarray(list(r.values.values()), dtype=np.float32),
            )
        )

    def _check_complete(self) -> None:
        """The run is complete once a `stop_after` condition is met and the update calls owed then are done."""
        stop_after, now, limiter = self.params.stop_after, time.monotonic(), self.session.buffer.rate_limiter
        if self.ending is None and stop_after.active:
            c = self.session.counters
            success, window = self.session.recent_success()
            why = stop_after.reached(c.env_steps, c.episodes, now - self._started, success, window)
            if why is not None:
                self.ending = RunEnding.begin(why, limiter, now, stop_after.catch_up_s)
                owed = self.ending.owed(limiter, self.params.learning.batch_size)
                self.log.info("%s; %d update calls owed first (at most %g s)", why, owed, stop_after.catch_up_s)
        if self.ending is not None and self.ending.due(limiter, now):
            self.complete(self.ending.why)

    def diagnostics(self) -> list[Status]:
        return [*super().diagnostics(), *self.health.statuses()]

    def destroy(self) -> None:
        if self.session.stopped:
            return  # destroyed already
        if self.fleet is not None:
            self.fleet.close()
        started = time.monotonic()
        try:
            self.session.close()
        finally:
            self.publisher.close()
            self.log.info("learner shut down in %.2f s", time.monotonic() - started)
