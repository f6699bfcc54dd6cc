"""`ActingSession`: the rollout's ROS-free core. Observations in, actions out, for several robots.

Observations are queued per robot (the newest unanswered one of each) and answered together: ONE batched forward
pass per policy version (`PinnedPolicies` says which version each robot acts with). Until the first weights are
here (`wait_for_weights`) nothing is answered and the robot holds; episodes with ids below `start_episode` are left
to another actor (e.g. a scripted expert recording demos). While the learner has received fewer than
`random_steps` transitions (standard SAC's warm-up), the actions are uniform in [-1, 1].

Nothing bad is acted on: an observation that fails `check_observation` (a state that is not finite, another
robot's id on this robot's topic, ...) is not answered, and an action that fails `check_action` (values that are
not finite or outside [-1, 1]) is not sent; each refusal is counted per cause and logged, rate-limited
(`refusals`).

Sync mode: after a robot's episode ends, `ready_to_reset` waits for the learner's receipt of that episode, which
names the first version trained on it (`trained`), then for that version, whatever order they arrive in.

With `send: chunks` (a VLA's chunks played by the robot itself, `user.acting.chunks`) an observation is answered
only when its robot's next chunk is due: with a whole chunk, continuing (mode rtc) what the robot still plays.

The session never touches a bus: actions leave through an `ActionSink` (the node's publishers), weights come from a
`WeightSource` (the node's weight subscriber), and the node feeds it observations, the learner's transition count
and receipts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np
import torch

from user.acting.chunks import ChunkPlans, chunk_for
from user.acting.config import ActingConfig
from user.acting.pinning import PinnedPolicies, WeightSource
from user.interfaces.chunks import ActionChunk
from user.interfaces.domain import Action, Observation
from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError, check_action, check_observation
from user.learner.device import resolve_device
from user.learner.state_select import StateSelectionError
from user.sync.trained import TrainedEpisodes

JOIN_TIMEOUT_S = 3.0
IDLE_WAIT_S = 0.1  # how long the inference thread waits for an observation before it checks for a stop
STOP_POLL_S = 0.2  # how often a waiting sync-mode reset checks for a stop
LATENCY_WINDOW = 10_000  # observation->action latencies (and batch sizes) kept for the report

ActionSink = Callable[[Action], None]  # sends one action to its robot (the node's publisher of `action.robot_id`)
ChunkSink = Callable[[ActionChunk], None]  # send chunks: sends one chunk to its robot
_Queued = tuple[Observation, float]  # an observation and when it was received (time.monotonic)
_Selected = tuple[Observation, float, np.ndarray]  # ... and the state the policy acts on


class ActingSession:
    """Batched acting for several robots over pinned weight versions; `observe` and the notes are thread-safe."""

    def __init__(
        self,
        config: ActingConfig,
        weights: WeightSource,
        send: ActionSink,
        log: logging.Logger | None = None,
        rng: np.random.Generator | None = None,
        *,
        send_chunk: ChunkSink | None = None,
    ) -> None:
        if config.send == "chunks" and send_chunk is None:
            raise ValueError("send: chunks needs a chunk sink")
        self.config = config
        self.plans = ChunkPlans(config.chunking)  # send chunks: each robot's last chunk
        self._send_chunk: ChunkSink = send_chunk or _no_chunk_sink
        self.weights = weights
        self.log = log or logging.getLogger("user.acting.session")
        self.refusals = Refusals(self.log)  # observations refused, actions not sent (see user.interfaces.validate)
        self.policy_state = config.learning.policy_state()  # selected, or conditioned on the robot's task
        device = resolve_device(config.device)  # a GPU that is not there is a ConfigError here
        self.policies = PinnedPolicies(
            lambda: config.learning.build_policy().to(device), weights, immediate=config.apply == "immediate"
        )
        self.trained = TrainedEpisodes()  # sync: the version the learner trained on each episode (receipts)
        self.answered = 0
        self.skipped = 0  # observations not answered (no weights yet, demo episodes, bad state)
        self.latencies_s: deque[float] = deque(maxlen=LATENCY_WINDOW)  # receive -> sent, per observation
        self.batch_sizes: deque[int] = deque(maxlen=LATENCY_WINDOW)
        self.learner_env_steps = 0  # transitions the learner has received, from its stats (random_steps)
        self._send_action = send
        self._rng = rng if rng is not None else np.random.default_rng()
        self._pending: dict[str, _Queued] = {}  # robot -> newest unanswered (obs, received)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._warned: set[str] = set()
        self._forget: set[str] = set()  # robots that left: their pinning goes, on the inference thread
        self._worker: threading.Thread | None = None

    # ---- in -------------------------------------------------------------------------------------

    def observe(self, robot: str, obs: Observation) -> None:
        """What `robot` saw, from its observation topic: queued when valid and of that robot, else refused (the
        robot holds until a good one comes)."""
        try:
            check_observation(obs, robot_id=robot)
        except InvalidMessageError as exc:
            self.skipped += 1
            where = f"observation on /{robot}/observation (episode {obs.episode_id} step {obs.step})"
            self.refusals.invalid(where, exc)
            return
        with self._cond:
            self._pending[obs.robot_id] = (obs, time.monotonic())
            self._cond.notify()

    def forget(self, robot: str) -> None:
        """`robot` left: its queued observation is dropped, its pinned version released (a copy no robot uses goes)."""
        with self._cond:
            self._pending.pop(robot, None)
            self._forget.add(robot)
        self.plans.forget(robot)

    def note_learner_steps(self, env_steps: int) -> None:
        """The learner's stats: it has received `env_steps` transitions (ends the warm-up of `random_steps`)."""
        self.learner_env_steps = max(self.learner_env_steps, env_steps)

    def note_receipt(self, robot: str, *, robot_id: str, episode_id: int, version: int) -> None:
        """A learner's receipt on `robot`'s topic: `version` is the first trained on `robot_id`'s episode. Another
        robot's receipt on this robot's topic releases nothing."""
        if robot_id == robot:
            self.trained.note(robot, episode_id, version)

    @property
    def warming_up(self) -> bool:
        """Still acting at random: the learner has not yet received `random_steps` transitions."""
        return self.learner_env_steps < self.config.random_steps

    # ---- acting ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Answer queued observations on a thread of its own until `close`."""
        self._worker = threading.Thread(target=self._serve, name="rollout", daemon=True)
        self._worker.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                self.act_pending(IDLE_WAIT_S)
            except Exception as exc:  # never let one bad batch stop serving
                self.log.exception("inference failed: %s", exc)

    def act_pending(self, timeout_s: float) -> int:
        """Answer every queued observation, waiting up to `timeout_s` for one when none is; how many were taken."""
        with self._cond:
            if not self._pending:
                self._cond.wait(timeout_s)
            pending, self._pending = self._pending, {}
            forget, self._forget = self._forget, set()
        for robot in forget:
            self.policies.forget(robot)
        if pending:
            self.answer(list(pending.values()))
        return len(pending)

    def answer(self, items: list[_Queued]) -> None:
        """Act on `items` (at most one per robot): one batched forward pass per version they are pinned to."""
        if self.config.wait_for_weights and self.weights.version == 0:  # none applied yet (a learner starts at 1)
            self.skipped += len(items)
            return
        for version, group in self._by_version(items).items():
            self._act(version, group)

    def _by_version(self, items: list[_Queued]) -> dict[int, list[_Selected]]:
        """The observations to answer, with the state the policy acts on, grouped by the version that acts."""
        groups: dict[int, list[_Selected]] = {}
        for obs, received in items:
            if obs.episode_id < self.config.start_episode:
                self.skipped += 1
                continue
            try:
                state = self.policy_state.of(obs)
            except StateSelectionError as exc:
                self.skipped += 1
                self._warn_once(obs.robot_id, f"cannot act for {obs.robot_id}: {exc}")
                continue
            version = self.policies.version_for(obs.robot_id, obs.episode_id)
            lacking = [c for c in self.policies.policy(version).cameras if c not in {i.camera for i in obs.images}]
            if lacking:
                self.skipped += 1
                where = f"observation of {obs.robot_id} (episode {obs.episode_id} step {obs.step})"
                self.refusals.refuse("camera", f"{where}: no image from camera(s) {lacking}, which the policy looks at")
                continue
            groups.setdefault(version, []).append((obs, received, state))
        return groups

    def _act(self, version: int, group: list[_Selected]) -> None:
        if self.config.send == "chunks":
            for item in group:
                self._act_chunk(version, *item)
            return
        policy = self.policies.policy(version)
        states = np.stack([s for _, _, s in group])
        images = {camera: _frames(camera, [obs for obs, _, _ in group]) for camera in policy.cameras}
        with torch.no_grad():
            batch = policy.preprocess(states, images)
            actions = policy.act_tensor(batch, deterministic=self.config.deterministic).cpu().numpy()
        if self.warming_up:  # standard SAC's warm-up: uniform random actions, off-policy data for the learner
            actions = self._rng.uniform(-1.0, 1.0, actions.shape).astype(np.float32)
        for (obs, received, _), data in zip(group, actions, strict=True):
            self._send(obs, received, data, version, policy.action_dim)
        self.batch_sizes.append(len(group))

    def _act_chunk(self, version: int, obs: Observation, received: float, state: np.ndarray) -> None:
        """Send chunks: a new chunk for this robot when one is due (continuing what it still plays)."""
        robot, plans = obs.robot_id, self.plans
        if not plans.due(robot, obs.episode_id, obs.step):
            return
        policy = self.policies.policy(version)
        images = {camera: _frames(camera, [obs]) for camera in policy.cameras}
        previous = plans.previous(robot, obs.episode_id, obs.step)
        with torch.no_grad():
            batch = policy.preprocess(state[None], images)
            chunk = chunk_for(policy, batch, previous, self.config.chunking, deterministic=self.config.deterministic)
        if not np.isfinite(chunk).all():
            self.skipped += 1
            self.refusals.refuse("chunk", f"chunk of policy version {version} for {robot}: not finite; not sent")
            return
        if self.config.chunking.added_latency_s > 0:
            self._stop.wait(self.config.chunking.added_latency_s)
        seq = plans.sent(robot, obs.episode_id, obs.step, chunk)
        self._send_chunk(ActionChunk(robot, obs.episode_id, obs.step, seq, chunk, version, obs.stamp_ns))
        self.latencies_s.append(time.monotonic() - received)
        self.answered += 1

    def _send(self, obs: Observation, received: float, data: np.ndarray, version: int, dim: int) -> None:
        """Send the policy's action for `obs`, unless it is not a valid command (e.g. not finite): then the robot
        gets none and holds."""
        action = Action(  # source: Action's default, 0 = user/msg/Action SOURCE_POLICY
            robot_id=obs.robot_id,
            episode_id=obs.episode_id,
            step=obs.step,
            data=data.astype(np.float32),
            stamp_ns=obs.stamp_ns,
            intervened=False,
            policy_version=version,
        )
        try:
            check_action(action, robot_id=obs.robot_id, dim=dim)
        except InvalidMessageError as exc:
            self.skipped += 1
            what = f"action of policy version {version} for {obs.robot_id} (episode {obs.episode_id} step {obs.step})"
            self.refusals.invalid(what, exc)
            return
        self._send_action(action)
        self.latencies_s.append(time.monotonic() - received)
        self.answered += 1

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.log.error("%s", message)

    # ---- sync mode ------------------------------------------------------------------------------

    def ready_to_reset(self, robot: str, episode_id: int) -> bool:
        """After `robot`'s episode `episode_id` ended: wait for its receipt and the version it names. True: reset the
        robot now (that version is in use, or `sync_timeout_s` passed, which is logged); False: the session stops."""
        deadline = time.monotonic() + self.config.sync_timeout_s
        version = None
        while version is None or not self.weights.wait_for_version(version, _poll(deadline)):
            if self._stop.is_set():
                return False
            if version is None:
                version = self.trained.wait(robot, episode_id, _poll(deadline))
            if time.monotonic() >= deadline:
                what = "no receipt" if version is None else f"policy version {version} never arrived"
                timeout = self.config.sync_timeout_s
                self.log.error("%s: episode %d: %s within %.0f s; resetting anyway", robot, episode_id, what, timeout)
                return True
        return not self._stop.is_set()

    # ---- how it keeps up ------------------------------------------------------------------------

    def latency_percentile(self, q: float) -> float:
        """Receive-to-send latency percentile `q` (0..100) over the recent window, seconds."""
        return float(np.percentile(np.asarray(self.latencies_s), q)) if self.latencies_s else float("nan")

    def mean_batch(self) -> float:
        """Observations answered per forward pass over the recent window (nan before the first)."""
        batches = list(self.batch_sizes)
        return float(np.mean(batches)) if batches else float("nan")

    def close(self) -> None:
        """Stop acting (the inference thread ends, a waiting `ready_to_reset` returns False within STOP_POLL_S)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._worker is not None:
            self._worker.join(JOIN_TIMEOUT_S)


def _no_chunk_sink(chunk: ActionChunk) -> None:
    raise ValueError(f"no chunk sink: the chunk for {chunk.robot_id} cannot be sent")


def _frames(camera: str, group: list[Observation]) -> np.ndarray:
    """(B,) object array of `camera`'s encoded frames in the group's observations (each has one: `_by_version`)."""
    out = np.empty(len(group), dtype=object)
    out[:] = [next(i.data for i in obs.images if i.camera == camera) for obs in group]
    return out


def _poll(deadline: float) -> float:
    return max(0.0, min(STOP_POLL_S, deadline - time.monotonic()))
