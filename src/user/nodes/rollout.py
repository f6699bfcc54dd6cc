"""`rollout` node: the learned policy at the robot site. Observations in, actions out, for several robots.

For every robot in `robots` it subscribes `/<robot>/observation` and answers each observation with an
action on `/<robot>/action`, stamped with the episode, the step and the policy version that produced it.
Observations that arrive together (several robots, one control tick) are answered with ONE batched forward
pass per policy version.

Weights arrive on `weights_topic` (`user.sync`): the newest complete version is kept, and each robot is
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
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
import torch

from user.bus.base import BEST_EFFORT, RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.domain import Action, Observation, action_to_msg, observation_from_msg
from user.interfaces.episode_events import RESET_SEED_DEFAULT, EpisodeKind, episode_event_from_msg
from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError, check_action, check_observation
from user.learner.config import LearningConfig
from user.learner.state_select import StateSelectionError
from user.policies.base import Policy
from user.robot_loop.gate import SOURCE_POLICY
from user.runtime.node import Node
from user.sync.subscriber import WeightSubscriber
from user.sync.trained import TrainedEpisodes

JOIN_TIMEOUT_S = 3.0
STOP_POLL_S = 0.2  # how often a waiting sync-mode reset checks for shutdown
LATENCY_WINDOW = 10_000  # observation->action latencies kept for percentiles


@dataclass
class RolloutParams:
    robots: list[str] = setting([], "robot ids this node acts for")
    learning: LearningConfig = setting(LearningConfig(), "policy (must match the learner's)")
    weights_topic: str = setting("/policy/weights", "where the learner publishes weights")
    weights_publisher: str = setting(
        "", "apply only weights published by this learner (its learner_id, named in every chunk); empty: any"
    )
    apply: Literal["episode_boundary", "immediate"] = setting(
        "episode_boundary", "when a robot switches to new weights"
    )
    deterministic: bool = setting(False, "act with the mean action (evaluation) instead of sampling (exploration)")
    wait_for_weights: bool = setting(True, "do not act before the first weights arrived (the robot holds)")
    start_episode: int = setting(0, "answer only episodes with this id or later (earlier: demos by an expert)", min=0)
    mode: Literal["async", "sync"] = setting("async", "sync: reset robots only after the learner published")
    sync_timeout_s: float = setting(
        600.0, "sync: longest wait for the learner's version trained on a robot's episode, s", min=0.1
    )
    reset_timeout_s: float = setting(15.0, "sync: reset service deadline, s", min=0.1)
    random_steps: int = setting(
        0,
        "act uniformly at random in [-1, 1] until the learner has received this many transitions (its stats' "
        "env_steps), as standard SAC warms up (CleanRL: 5000 steps); 0 = act with the policy from the start",
        min=0,
    )
    stats_topic: str = setting("/learner/stats", "random_steps: where the learner's stats (env_steps) come from")
    torch_threads: int = setting(1, "torch CPU threads for inference", min=1)
    report_period_s: float = setting(
        60.0, "log observations answered, latency p50/p99 and mean batch size this often, s; 0 = never", min=0.0
    )

    def __post_init__(self) -> None:
        if not self.robots:
            raise ConfigError("robots: list at least one robot id to act for")


class RolloutNode(Node):
    """Batched policy inference for several robots, versioned weights, episode-boundary switching."""

    Params = RolloutParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(RolloutParams)
        torch.set_num_threads(p.torch_threads)
        self.latest = p.learning.build_policy()
        self.selector = p.learning.state_selector()
        self.weights = WeightSubscriber(
            self,
            self.latest,
            policy_id=p.learning.policy_id,
            topic=p.weights_topic,
            apply="immediate",
            publisher=p.weights_publisher,
        )
        self.refusals = Refusals(self.log)  # observations refused, actions not sent (see user.interfaces.validate)
        self._policies: dict[int, Policy] = {}  # version -> a policy copy some robot is pinned to
        self._pinned: dict[str, int] = {}  # robot -> version it acts with
        self._episode: dict[str, int] = {}  # robot -> episode id of its pinned version
        self._pending: dict[str, tuple[Observation, float]] = {}  # robot -> newest unanswered (obs, received)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self.answered = 0
        self.skipped = 0  # observations not answered (no weights yet, demo episodes, bad state)
        self.latencies_s: deque[float] = deque(maxlen=LATENCY_WINDOW)  # receive -> publish, per observation
        self.batch_sizes: deque[int] = deque(maxlen=LATENCY_WINDOW)
        self._warned: set[str] = set()
        self.learner_env_steps = 0  # transitions the learner has received, from its stats (random_steps)
        self._rng = np.random.default_rng()
        if p.random_steps > 0:
            self.create_subscription(p.stats_topic, "user/msg/TrainingStats", self._on_stats)
        self.trained = TrainedEpisodes()  # sync: the version the learner trained on each episode (receipts)
        self._pubs = {r: self.create_publisher(f"/{r}/action", "user/msg/Action", RELIABLE) for r in p.robots}
        for robot in p.robots:
            on_obs = partial(self._on_observation, robot)
            self.create_subscription(f"/{robot}/observation", "user/msg/Observation", on_obs, BEST_EFFORT)
            if p.mode == "sync":
                self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
                self.create_subscription(f"/{robot}/episode_acks", "user/msg/EpisodeAck", partial(self._on_ack, robot))
        # sync mode: one reset waits per robot at most; joined on destroy
        self._resets = ThreadPoolExecutor(max_workers=len(p.robots), thread_name_prefix="rollout-reset")
        if p.report_period_s > 0:
            self.create_timer(p.report_period_s, self._report)
        self._worker = threading.Thread(target=self._serve, name="rollout", daemon=True)
        self._worker.start()

    # ---- bus callbacks --------------------------------------------------------------------------

    def _on_observation(self, robot: str, msg: Any) -> None:
        try:
            obs = observation_from_msg(msg)
            check_observation(obs, robot_id=robot)
        except InvalidMessageError as exc:  # never act on it: the robot holds until a good one comes
            self.skipped += 1
            where = f"observation on /{robot}/observation (episode {msg.episode_id} step {msg.step})"
            self.refusals.invalid(where, exc)
            return
        with self._cond:
            self._pending[obs.robot_id] = (obs, time.monotonic())
            self._cond.notify()

    def _on_stats(self, msg: Any) -> None:
        self.learner_env_steps = max(self.learner_env_steps, int(msg.env_steps))

    @property
    def warming_up(self) -> bool:
        """Still acting at random: the learner has not yet received `random_steps` transitions."""
        return self.learner_env_steps < self.params.random_steps

    def _on_event(self, msg: Any) -> None:
        event = episode_event_from_msg(msg)
        if event.kind is EpisodeKind.END:  # the learner trains on this episode, publishes, then says which version
            self._resets.submit(self._sync_reset, event.robot_id, event.episode_id)

    def _on_ack(self, robot: str, msg: Any) -> None:
        if msg.robot_id == robot:  # another robot's receipt on this robot's topic releases nothing
            self.trained.note(robot, int(msg.episode_id), int(msg.policy_version))

    # ---- inference thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                if not self._pending:
                    self._cond.wait(0.1)
                pending, self._pending = self._pending, {}
            if pending:
                try:
                    self._answer(list(pending.values()))
                except Exception as exc:  # never let one bad batch stop serving
                    self.log.exception("inference failed: %s", exc)

    def _answer(self, items: list[tuple[Observation, float]]) -> None:
        if self.params.wait_for_weights and self.weights.version == 0:  # none applied yet (a learner starts at 1)
            self.skipped += len(items)
            return
        groups: dict[int, list[tuple[Observation, float, np.ndarray]]] = {}
        for obs, received in items:
            if obs.episode_id < self.params.start_episode:
                self.skipped += 1
                continue
            try:
                state = self.selector.select(obs.state, obs.state_names)
            except StateSelectionError as exc:
                self.skipped += 1
                self._warn_once(obs.robot_id, f"cannot act for {obs.robot_id}: {exc}")
                continue
            version = self._version_for(obs)
            groups.setdefault(version, []).append((obs, received, state))
        for version, group in groups.items():
            policy = self._policies[version]
            states = np.stack([s for _, _, s in group])
            with torch.no_grad():
                actions = policy.act_tensor(
                    policy.preprocess(states, {}), deterministic=self.params.deterministic
                ).numpy()
            if self.warming_up:  # standard SAC's warm-up: uniform random actions, off-policy data for the learner
                actions = self._rng.uniform(-1.0, 1.0, actions.shape).astype(np.float32)
            for (obs, received, _), data in zip(group, actions, strict=True):
                self._send(obs, received, data, version, policy.action_dim)
            self.batch_sizes.append(len(group))

    def _send(self, obs: Observation, received: float, data: np.ndarray, version: int, dim: int) -> None:
        """Publish the policy's action for `obs`, unless it is not a valid command (e.g. not finite): then the robot
        gets none and holds."""
        action = Action(
            robot_id=obs.robot_id,
            episode_id=obs.episode_id,
            step=obs.step,
            data=data.astype(np.float32),
            stamp_ns=obs.stamp_ns,
            intervened=False,
            source=SOURCE_POLICY,
            policy_version=version,
        )
        try:
            check_action(action, robot_id=obs.robot_id, dim=dim)
        except InvalidMessageError as exc:
            self.skipped += 1
            what = f"action of policy version {version} for {obs.robot_id} (episode {obs.episode_id} step {obs.step})"
            self.refusals.invalid(what, exc)
            return
        self._pubs[obs.robot_id].publish(action_to_msg(action, self.codec))
        self.latencies_s.append(time.monotonic() - received)
        self.answered += 1

    def _version_for(self, obs: Observation) -> int:
        """The version `obs.robot_id` acts with now (pins a new one at an episode boundary)."""
        robot = obs.robot_id
        newest = self.weights.version
        if self.params.apply == "immediate" or self._episode.get(robot) != obs.episode_id:
            if newest not in self._policies:
                copy = self.params.learning.build_policy()
                copy.load_weights(self.weights.snapshot())
                newest = copy.version
                self._policies[newest] = copy
            self._pinned[robot] = newest
            self._episode[robot] = obs.episode_id
            in_use = set(self._pinned.values())
            for v in [v for v in self._policies if v not in in_use]:
                del self._policies[v]
        return self._pinned[robot]

    # ---- sync mode ------------------------------------------------------------------------------

    def _sync_reset(self, robot: str, episode_id: int) -> None:
        """After `robot`'s episode: wait for the version the learner trained on it (its receipt names it), then
        reset. At the deadline the robot is reset anyway, and that is logged."""
        if self._wait_trained(robot, episode_id, time.monotonic() + self.params.sync_timeout_s):
            return  # stopping
        request = self.codec.msg_class("user/srv/Reset_Request")(robot_id=robot, seed=RESET_SEED_DEFAULT)
        try:
            response = self.call_service(f"/{robot}/reset", "user/srv/Reset", request, self.params.reset_timeout_s)
        except Exception as exc:
            self.log.error("%s: reset failed: %s", robot, exc)
            return
        if not response.success:
            self.log.error("%s: reset refused: %s", robot, response.message)

    def _wait_trained(self, robot: str, episode_id: int, deadline: float) -> bool:
        """Wait for the receipt of (robot, episode) and its version, until `deadline`; True when stopping."""
        version = None
        while version is None or not self.weights.wait_for_version(version, self._poll(deadline)):
            if self._stop.is_set():
                return True
            if version is None:
                version = self.trained.wait(robot, episode_id, self._poll(deadline))
            if time.monotonic() >= deadline:
                what = "no receipt" if version is None else f"policy version {version} never arrived"
                self.log.error("%s: episode %d: %s within %.0f s; resetting anyway", robot, episode_id, what,
                               self.params.sync_timeout_s)  # fmt: skip
                return False
        return self._stop.is_set()

    @staticmethod
    def _poll(deadline: float) -> float:
        return max(0.0, min(STOP_POLL_S, deadline - time.monotonic()))

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.log.error("%s", message)

    def _report(self) -> None:
        """Timer: how the rollout is keeping up (what a robot waits for an action)."""
        batches = list(self.batch_sizes)
        self.log.info(
            "answered %d observations (%d skipped); observation -> action p50 %.1f ms, p99 %.1f ms; mean batch %.2f",
            self.answered,
            self.skipped,
            1e3 * self.latency_percentile(50),
            1e3 * self.latency_percentile(99),
            float(np.mean(batches)) if batches else float("nan"),
        )

    def latency_percentile(self, q: float) -> float:
        """Receive-to-publish latency percentile `q` (0..100) over the recent window, seconds."""
        return float(np.percentile(np.asarray(self.latencies_s), q)) if self.latencies_s else float("nan")

    def destroy(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._worker.join(JOIN_TIMEOUT_S)
        self._resets.shutdown(wait=True, cancel_futures=True)  # a waiting reset sees the stop within STOP_POLL_S
        self.weights.close()
