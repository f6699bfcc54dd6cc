"""`ControlLoop`: episodes on one robot. Each `tick` gates an action, steps the robot, scores the step and
assembles the `Transition`; `reset` starts the next episode (seeded, ids increasing per robot, from
`EpisodeIds`: a `DurableEpisodeIds` continues them across restarts); `end_episode` ends the running one.

`request_end(episode_id)` (thread-safe: a person's EPISODE_END press arrives on a bus thread) ends that
episode after its next recorded step, marked truncated unless the scorer already terminated it: the
person's verdict (reward, success) is written downstream by a reward node.

A tick with no fresh action at all (no policy yet, policy stalled) holds the robot and records nothing:
the episode neither advances nor stores a transition the policy never chose; so does a tick while a required
camera is dead or stale (`Observer.camera_fault`). A step the robot itself
held (safety, e-stop) is recorded with the zero action it applied and source HOLD. A step that moved
records the action chosen (policy or person) within the action space's bounds, not the safety filter's
output (see `_recorded_action`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.interfaces.domain import Action, Observation, Transition
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind
from user.robot_loop.episode_ids import EpisodeIds
from user.robot_loop.gate import SOURCE_HOLD, SOURCE_SCRIPTED, ActionGate, GatedAction
from user.robot_loop.observe import Observer
from user.robot_loop.scoring import Scorer
from user.robots.base import Robot, StepResult

_log = logging.getLogger(__name__)


class NoEpisodeError(RuntimeError):
    """`tick` was called before `reset` or after the episode ended."""


@dataclass(frozen=True)
class TickResult:
    """What one control period produced."""

    observation: Observation  # the latest observation (publish it: the policy acts on it)
    transition: Transition | None = None  # None when the robot held for lack of an action
    ended: EpisodeEvent | None = None  # set when this step ended the episode
    held: bool = False  # the robot held (no fresh action, or safety)


@dataclass
class _Episode:
    episode_id: int
    step: int = 0
    episode_return: float = 0.0
    interventions: int = 0
    success: bool = False
    active: bool = True


class ControlLoop:
    """Runs episodes of one robot; not thread-safe (call it from the control thread only)."""

    def __init__(
        self,
        robot: Robot,
        scorer: Scorer,
        observer: Observer,
        gate: ActionGate,
        *,
        seed: int | None = 0,
        episode_ids: EpisodeIds | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.robot = robot
        self.scorer = scorer
        self.observer = observer
        self.gate = gate
        self.seed = seed  # episode n (its id) resets with seed + n, across restarts too; None: unseeded
        self.episode_ids = episode_ids or EpisodeIds(0)
        self._clock_ns = clock_ns
        self._episode: _Episode | None = None
        self._observation: Observation | None = None
        self.held_ticks = 0  # ticks without a fresh action
        self._end_request: int | None = None  # episode id a person asked to end; guarded by _end_lock
        self._end_lock = threading.Lock()
        self.ended_by_request = 0  # episodes ended by request_end

    @property
    def robot_id(self) -> str:
        return self.observer.config.robot_id

    @property
    def episode_id(self) -> int | None:
        return None if self._episode is None else self._episode.episode_id

    @property
    def in_episode(self) -> bool:
        return self._episode is not None and self._episode.active

    @property
    def observation(self) -> Observation | None:
        return self._observation

    def request_end(self, episode_id: int | None = None) -> bool:
        """Ask to end episode `episode_id` (None: the running one) after its next step; any thread.

        Returns False (nothing to end) when that episode is not running."""
        episode = self._episode
        if episode is None or not episode.active:
            return False
        target = episode.episode_id if episode_id is None else episode_id
        if target != episode.episode_id:
            return False
        with self._end_lock:
            self._end_request = target
        return True

    def _end_requested(self, episode_id: int) -> bool:
        """Whether the running episode was asked to end (a request left from an older episode is void)."""
        with self._end_lock:
            request, self._end_request = self._end_request, None
        return request == episode_id

    def end_episode(self) -> EpisodeEvent | None:
        """End the running episode, if any, as an operator reset does; its END event (None: none ran)."""
        if self._episode is None or not self._episode.active:
            return None
        return self._end(self._episode)

    def reset(
        self, seed: int | None = None, *, use_default_seed: bool = True
    ) -> tuple[Observation, list[EpisodeEvent]]:
        """End the running episode (if any, as an operator reset) and start the next one.

        `seed` None with `use_default_seed` takes the loop's seed schedule (seed + the new episode's id: a robot
        that continues its ids after a restart does not repeat the start states it already had).
        Returns the first observation and the events to publish (END of the old episode, START of the new).
        Raises `EpisodeIdError` (nothing changed) when the new episode's id cannot be kept.
        """
        episode = _Episode(self.episode_ids.take())
        ended = self.end_episode()
        events = [] if ended is None else [ended]
        if seed is None and use_default_seed and self.seed is not None:
            seed = self.seed + episode.episode_id
        self.gate.start_episode(episode.episode_id)
        arm = self.robot.reset(seed)
        self._episode = episode
        self._observation = self.observer.observe(arm, episode.episode_id, 0, self.gate.policy_version)
        events.append(self._event(episode, EpisodeKind.START))
        _log.info("episode %d started (seed %s)", episode.episode_id, seed)
        return self._observation, events

    def tick(self, now: float | None = None) -> TickResult:
        """One control period: step with the gated action, or hold when there is none."""
        episode, obs = self._episode, self._observation
        if episode is None or obs is None or not episode.active:
            raise NoEpisodeError(f"robot {self.robot_id!r}: no episode running; reset() first")
        camera_fault = self.observer.camera_fault()  # a required camera dead or stale: never move on its frames
        choice = None if camera_fault else self.gate.choose(now)
        if choice is None:
            self.held_ticks += 1
            result = self.robot.hold(camera_fault or self.gate.stale_reason(now))
            version = obs.policy_version
            self._observation = self.observer.observe(result.state, episode.episode_id, episode.step, version)
            return TickResult(self._observation, held=True)
        result = self.robot.step(choice.data)
        transition = self._transition(episode, obs, choice, result)
        if not transition.done and self._end_requested(episode.episode_id):
            transition = dataclasses.replace(transition, truncated=True)
            self.ended_by_request += 1
            _log.info("episode %d: ending at step %d as requested", episode.episode_id, episode.step)
        self._observation = transition.next_observation
        episode.step += 1
        episode.episode_return += transition.reward
        episode.interventions += int(transition.action.intervened)
        episode.success = episode.success or transition.success
        ended = self._end(episode) if transition.done else None
        return TickResult(transition.next_observation, transition, ended, held=result.held)

    def _transition(self, episode: _Episode, obs: Observation, choice: GatedAction, result: StepResult) -> Transition:
        score = self.scorer.score(result.state)
        next_obs = self.observer.observe(result.state, episode.episode_id, episode.step + 1, self.gate.policy_version)
        source = SOURCE_HOLD if result.held else choice.source
        action = Action(
            robot_id=self.robot_id,
            episode_id=episode.episode_id,
            step=episode.step,
            data=self._recorded_action(choice, result),
            stamp_ns=result.state.stamp_ns,
            intervened=choice.intervened,
            source=source,
            policy_version=choice.policy_version,
            chunk_seq=choice.chunk_seq,
            chunk_index=choice.chunk_index,
        )
        terminated = score.terminated
        truncated = not terminated and (score.truncated or episode.step + 1 >= self.scorer.max_steps)
        return Transition(
            observation=obs,
            action=action,
            reward=score.reward,
            next_observation=next_obs,
            terminated=terminated,
            truncated=truncated,
            success=score.success,
            is_demo=source == SOURCE_SCRIPTED,
            stamp_ns=result.state.stamp_ns,
        )

    def _recorded_action(self, choice: GatedAction, result: StepResult) -> npt.NDArray[np.float32]:
        """The action a transition stores: the one chosen (policy or person), within the action space.

        Not the safety-filtered one: the filter (workspace box, orientation and gripper limits) is part of
        the environment the policy acts in. Storing its output would train the critic only on actions the
        actor never chose (a gripper held closed is always "closed", whatever the policy asked), and the
        actor's gradient for those components would be the critic's extrapolation. A held step stores the
        zero action it applied."""
        if result.held:
            return np.asarray(result.applied, dtype=np.float32)
        space = self.robot.action_space
        return np.clip(np.asarray(choice.data, dtype=np.float32), space.low, space.high).astype(np.float32)

    def _end(self, episode: _Episode) -> EpisodeEvent:
        episode.active = False
        _log.info(
            "episode %d ended after %d steps: %s, return %.3f, %d intervened",
            episode.episode_id,
            episode.step,
            "success" if episode.success else "no success",
            episode.episode_return,
            episode.interventions,
        )
        return self._event(episode, EpisodeKind.END)

    def _event(self, episode: _Episode, kind: EpisodeKind) -> EpisodeEvent:
        return EpisodeEvent(
            robot_id=self.robot_id,
            task=self.observer.config.task,
            episode_id=episode.episode_id,
            kind=kind,
            stamp_ns=self._clock_ns(),
            success=episode.success,
            steps=episode.step,
            episode_return=episode.episode_return,
            interventions=episode.interventions,
            policy_version=self.gate.policy_version,
        )
