"""`rollout` node: the learned policy at the robot site. Observations in, actions out, for several robots.

For every robot in `robots`, and every robot that joins while the run goes on (`admit`: patterns of announced
robots that may join when they fit the policy; dropped once its announcement has been gone `leave_after_s`, see
`user.fleet`), it subscribes `/<robot>/observation` and answers each observation with an action on
`/<robot>/action`, stamped with the episode, the step and the policy version that produced it (`send: chunks`:
with a whole chunk on `/<robot>/action_chunk`, user/msg/ActionChunk, when the robot's next one is due).
Observations that arrive together (several robots, one control tick) are answered with ONE batched forward
pass per policy version.

Weights arrive on `weights_topic` (`user.sync`), or, with `weights_from: link` on the learner's machine, over
torch.distributed from the learner's `weight_link` (`user.sync.link_receiver`: a version applied whole or not at
all; a link that cannot be reached at start is an error naming its address, never a silent fall back to the Bus).
Either way the newest complete version is kept, and each robot is
pinned to the version that was newest when its episode started (`apply: episode_boundary`, the default,
since mid-episode changes destabilise learning), or follows the newest at every step (`apply: immediate`).
Robots on different versions are served from different policy copies, so one robot's episode boundary never
changes another's policy mid-episode.

Until the first weights arrive (`wait_for_weights`) the node does not answer: the robot holds. Episodes
with ids below `start_episode` are left to another actor (e.g. a scripted expert recording demos).

Nothing bad is acted on: an observation that fails `check_observation` (a state that is not finite, another
robot's id on this robot's topic, ...) is not answered, and an action that fails `check_action` (the policy
gave values that are not finite or outside [-1, 1]) is not sent; the robot holds. Weights are applied only
whole, finite, of the policy's layout and, with `weights_publisher`, from that learner (`user.sync`). Each
refusal is counted per cause and logged, rate-limited (`refusals`).

`mode: sync` (the baseline of the pipeline benchmark): robots run with `auto_reset: false`; when an
episode ends, this node waits for the learner's second receipt of that episode, which names the first
policy version trained on it (`user.sync.trained`), then for that version, and only then asks the robot to
reset. What to wait for is defined by the episodes the learner consumed, not by the order in which the END
event, the receipt and the weights arrive. Robots wait; that is the point of the baseline.

Every decision above is `user.acting.ActingSession`'s; this node only wires topics, the weight subscriber and
the reset service to it, as the learner node does over `LearningSession`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import torch

from user.acting.config import ActingConfig
from user.acting.session import ActingSession
from user.bus.base import BEST_EFFORT, LATCHED, RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.fleet import PolicySpec, capacity_of, watch_fleet
from user.fleet.claims import static_claim
from user.fleet.settings import ADMIT_HELP, DEFAULT_LEAVE_AFTER_S, LEAVE_HELP
from user.interfaces.chunks import ActionChunk, chunk_to_msg
from user.interfaces.domain import Action, action_to_msg, observation_from_msg
from user.interfaces.episode_events import RESET_SEED_DEFAULT, EpisodeKind, episode_event_from_msg
from user.interfaces.refusals import Refusals
from user.learner.device import resolve_device
from user.runtime.node import Node, TypedPublisher
from user.sync.link_receiver import LinkJoin, WeightLinkReceiver
from user.sync.subscriber import WeightSubscriber
from user.sync.trained import TrainedEpisodes

JOINED_RESET_WORKERS = 16  # sync mode with `admit`: resets of robots that joined at run time waiting at once


@dataclass(frozen=True)
class RolloutParams(ActingConfig):
    """How the session acts (`ActingConfig`: the policy, when weights apply, warm-up, the sync deadline) and how the
    node wires it: robots and topics, the mode, threads, reports."""

    robots: list[str] = setting([], "robot ids this node acts for (from the start to the end)")
    admit: list[str] = setting([], ADMIT_HELP)
    leave_after_s: float = setting(DEFAULT_LEAVE_AFTER_S, LEAVE_HELP, min=0.0)
    max_robots: int = setting(
        0, "admit: robots joined at run time this rollout serves at once (others wait until one leaves); 0 = any", min=0
    )
    site: str = setting(
        "",
        "admit: serve only robots announced at this site (others wait: their actions would cross sites every "
        "step); ignored with send: chunks; empty = any",
    )
    weights_from: Literal["bus", "link"] = setting(
        "bus", "bus: weights_topic; link: the learner's weight_link on this machine, over torch.distributed"
    )
    weight_link: LinkJoin = setting(
        LinkJoin(), "weights_from: link: where the learner serves weights", when=("weights_from", "link")
    )
    weights_topic: str = setting("/policy/weights", "where the learner publishes weights")
    weights_publisher: str = setting(
        "", "apply only weights published by this learner (its learner_id, named in every chunk); empty: any"
    )
    mode: Literal["async", "sync"] = setting("async", "sync: reset robots only after the learner published")
    reset_timeout_s: float = setting(15.0, "sync: reset service deadline, s", min=0.1)
    stats_topic: str = setting("/learner/stats", "random_steps: where the learner's stats (env_steps) come from")
    torch_threads: int = setting(1, "torch CPU threads for inference", min=1)
    report_period_s: float = setting(
        60.0, "log observations answered, latency p50/p99 and mean batch size this often, s; 0 = never", min=0.0
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.robots and not self.admit:
            raise ConfigError("robots: list at least one robot id to act for (or admit: robots that may join)")


class RolloutNode(Node):
    """Wires an `ActingSession` to the bus: observations, weights, stats and receipts in; actions and resets out."""

    Params = RolloutParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(RolloutParams)
        torch.set_num_threads(p.torch_threads)
        self.latest = p.learning.build_policy().to(resolve_device(p.device))
        self.weights: WeightSubscriber | WeightLinkReceiver
        if p.weights_from == "link":
            self.weights = WeightLinkReceiver(
                p.weight_link, self.latest, policy_id=p.learning.policy_id, name=self.name, log=self.log
            )
        else:
            self.weights = WeightSubscriber(
                self,
                self.latest,
                policy_id=p.learning.policy_id,
                topic=p.weights_topic,
                publisher=p.weights_publisher,
            )
        chunks = self._publish_chunk if p.send == "chunks" else None
        self.session = ActingSession(p, self.weights, self._publish, self.log, send_chunk=chunks)  # params: settings
        if p.random_steps > 0:
            self.create_subscription(p.stats_topic, "user/msg/TrainingStats", self._on_stats)
        self._pubs: dict[str, TypedPublisher] = {}  # robot -> its actions (send chunks: its chunks)
        self._assignments: dict[str, TypedPublisher] = {}  # admit: robot -> what it is told (served, or why it waits)
        for robot in p.robots:
            self._open_robot(robot)
        # its listed robots are its own: a rollout admitting robots at run time leaves them alone
        self._claims = [static_claim(self.bus.declare_token, self.name, robot) for robot in p.robots]
        # sync mode: one reset waits per robot at most; joined on destroy
        workers = len(p.robots) + (JOINED_RESET_WORKERS if p.admit else 0)
        self._resets = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout-reset")
        spec = PolicySpec.of(p.learning, self.latest.action_dim)
        # robots joining and leaving while the run goes on (`admit`)
        capacity = capacity_of(replace(p, site="") if p.send == "chunks" else p, "rollout")
        self.fleet = watch_fleet(  # probe False: it reads their observations anyway; claim: one rollout per robot
            self,
            p,
            spec,
            self._open_robot,
            self._close_robot,
            probe=False,
            capacity=capacity,
            wait=self._told_wait,
            claim=True,
            elsewhere=self._served_elsewhere,
        )
        if p.report_period_s > 0:
            self.create_timer(p.report_period_s, self._report)
        self.session.start()

    # ---- what the session counts ----------------------------------------------------------------

    @property
    def refusals(self) -> Refusals:
        """Observations refused, actions not sent (see user.interfaces.validate)."""
        return self.session.refusals

    @property
    def trained(self) -> TrainedEpisodes:
        """Sync: the version the learner trained on each episode (its receipts)."""
        return self.session.trained

    @property
    def answered(self) -> int:
        return self.session.answered

    @property
    def skipped(self) -> int:
        """Observations not answered (no weights yet, demo episodes, bad state, an action not sent)."""
        return self.session.skipped

    @property
    def warming_up(self) -> bool:
        """Still acting at random: the learner has not yet received `random_steps` transitions."""
        return self.session.warming_up

    def latency_percentile(self, q: float) -> float:
        """Receive-to-publish latency percentile `q` (0..100) over the recent window, seconds."""
        return self.session.latency_percentile(q)

    # ---- bus callbacks --------------------------------------------------------------------------

    def _told_wait(self, robot: str, reason: str) -> None:
        """`robot` cannot be served now: tell it why (latched on /<robot>/assignment; it logs it and holds)."""
        self._assignment(robot).publish(self.codec.msg_class("std_msgs/msg/String")(data=f"waiting: {reason}"))

    def _served_elsewhere(self, robot: str, holder: str) -> None:
        """Another rollout serves `robot`: what this one told it before (to wait) is replaced by who serves it."""
        if robot in self._assignments:
            self._assignment(robot).publish(self.codec.msg_class("std_msgs/msg/String")(data=f"served by {holder}"))

    def _assignment(self, robot: str) -> TypedPublisher:
        pub = self._assignments.get(robot)
        if pub is None:
            pub = self._assignments[robot] = self.create_publisher(
                f"/{robot}/assignment", "std_msgs/msg/String", LATCHED
            )
        return pub

    def _open_robot(self, robot: str) -> list[Any]:
        """Answer `robot`'s observations (sync mode: follow its episodes and receipts); the handles."""
        if self.params.send == "chunks":
            self._pubs[robot] = self.create_publisher(f"/{robot}/action_chunk", "user/msg/ActionChunk", RELIABLE)
        else:
            self._pubs[robot] = self.create_publisher(f"/{robot}/action", "user/msg/Action", RELIABLE)
        on_obs = partial(self._on_observation, robot)
        handles: list[Any] = [self._pubs[robot]]
        if self.params.admit:  # a joined robot is told who serves it (it may have been told to wait before)
            self._assignment(robot).publish(self.codec.msg_class("std_msgs/msg/String")(data=f"served by {self.name}"))
        handles.append(self.create_subscription(f"/{robot}/observation", "user/msg/Observation", on_obs, BEST_EFFORT))
        if self.params.mode == "sync":
            on_ack = partial(self._on_ack, robot)
            handles.append(
                self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
            )
            handles.append(self.create_subscription(f"/{robot}/episode_acks", "user/msg/EpisodeAck", on_ack))
        return handles

    def _close_robot(self, robot: str) -> None:
        """`robot` left or was refused: no more actions for it, its policy copy goes when no robot uses it."""
        self._pubs.pop(robot, None)
        self.session.forget(robot)

    def _on_observation(self, robot: str, msg: Any) -> None:
        obs = observation_from_msg(msg)
        if self.fleet is None or self.fleet.takes(robot, obs):
            self.session.observe(robot, obs)

    def _on_stats(self, msg: Any) -> None:
        self.session.note_learner_steps(int(msg.env_steps))

    def _on_event(self, msg: Any) -> None:
        event = episode_event_from_msg(msg)
        if event.kind is EpisodeKind.END:  # the learner trains on this episode, publishes, then says which version
            self._resets.submit(self._sync_reset, event.robot_id, event.episode_id)

    def _on_ack(self, robot: str, msg: Any) -> None:
        self.session.note_receipt(
            robot, robot_id=str(msg.robot_id), episode_id=int(msg.episode_id), version=int(msg.policy_version)
        )

    def _publish(self, action: Action) -> None:
        pub = self._pubs.get(action.robot_id)
        if pub is not None:  # None: the robot left meanwhile
            pub.publish(action_to_msg(action, self.codec))

    def _publish_chunk(self, chunk: ActionChunk) -> None:
        pub = self._pubs.get(chunk.robot_id)
        if pub is not None:  # None: the robot left meanwhile
            pub.publish(chunk_to_msg(chunk, self.codec))

    # ---- sync mode ------------------------------------------------------------------------------

    def _sync_reset(self, robot: str, episode_id: int) -> None:
        """After `robot`'s episode: once the session says so (the version trained on it is here, or the deadline
        passed), reset the robot."""
        if not self.session.ready_to_reset(robot, episode_id):
            return  # stopping
        request = self.codec.msg_class("user/srv/Reset_Request")(robot_id=robot, seed=RESET_SEED_DEFAULT)
        try:
            response = self.call_service(f"/{robot}/reset", "user/srv/Reset", request, self.params.reset_timeout_s)
        except Exception as exc:
            self.log.error("%s: reset failed: %s", robot, exc)
            return
        if not response.success:
            self.log.error("%s: reset refused: %s", robot, response.message)

    def _report(self) -> None:
        """Timer: how the rollout is keeping up (what a robot waits for an action) and the versions robots act with."""
        s = self.session
        self.log.info(
            "answered %d observations (%d skipped); observation -> action p50 %.1f ms, p99 %.1f ms; mean batch %.2f; "
            "policy versions in use: %s",
            s.answered,
            s.skipped,
            1e3 * s.latency_percentile(50),
            1e3 * s.latency_percentile(99),
            s.mean_batch(),
            ", ".join(map(str, s.policies.versions)) or "none yet",
        )

    def destroy(self) -> None:
        self.session.close()  # acting stops first: no action is published on a publisher the fleet closes below
        if self.fleet is not None:
            self.fleet.close()
        for claim in self._claims:
            claim.close()
        self._resets.shutdown(wait=True, cancel_futures=True)  # a waiting reset sees the stop within STOP_POLL_S
        self.weights.close()
