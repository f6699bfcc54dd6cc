"""`ActionGate`: each control period's action, from the freshest policy action and human intervention.

Policy actions and interventions arrive on bus threads (`feed_policy`, `feed_intervention`); the control
loop asks `choose()`. A fresh intervention (younger than its deadline) overrides the policy action and is
flagged `intervened` with source HUMAN; the overridden policy action's version is kept, so a learner knows
which policy the human corrected. Freshness comes from two `ActionWatchdog`s. Policy actions tagged with
an older episode than the current one (late arrivals after a reset) are dropped.

In lockstep mode (fast simulation: one step per observation, as fast as the policy answers) every
intervention message drives at most one step: it is consumed when used, as the tagged policy action is
answered once; wall-clock freshness alone would let one message cover many fast steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.interfaces.domain import Action
from user.robots.watchdog import ActionWatchdog

SOURCE_POLICY = 0  # user/msg/Action SOURCE_POLICY
SOURCE_HUMAN = 1  # user/msg/Action SOURCE_HUMAN
SOURCE_SCRIPTED = 2  # user/msg/Action SOURCE_SCRIPTED
SOURCE_HOLD = 3  # user/msg/Action SOURCE_HOLD


@dataclass(frozen=True)
class GatedAction:
    """What the gate chose for one period."""

    data: npt.NDArray[np.float32]  # the action to send to the robot (before safety processing)
    intervened: bool  # a human action replaced the policy's
    source: int  # SOURCE_* of `data`
    policy_version: int  # version of the policy action used or overridden (0 when there was none)
    policy_data: npt.NDArray[np.float32] | None  # the policy's action (used or overridden), None if none was fresh
    chunk_seq: int = 0  # the chunk the policy action was played from (used or overridden); 0: none, or no chunk
    chunk_index: int = 0  # its place in that chunk


@dataclass(frozen=True)
class _Meta:
    episode_id: int
    step: int
    source: int
    policy_version: int
    chunk_seq: int
    chunk_index: int


class ActionGate:
    """Freshest policy action, overridden by the freshest intervention. Thread-safe."""

    def __init__(
        self,
        policy_deadline_s: float,
        intervention_deadline_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        lockstep: bool = False,
    ) -> None:
        self._clock = clock
        self.lockstep = lockstep
        self._policy = ActionWatchdog(policy_deadline_s, clock)
        self._human = ActionWatchdog(intervention_deadline_s, clock)
        self._cond = threading.Condition()
        self._policy_meta: _Meta | None = None
        self._episode_id = 0
        self._wakes = 0
        self._interventions = 0  # intervention messages received
        self.stale_policy_actions = 0  # dropped because they belonged to an earlier episode
        self.policy_version = 0  # latest policy version seen

    @property
    def interventions_received(self) -> int:
        """Intervention messages fed so far."""
        with self._cond:
            return self._interventions

    def start_episode(self, episode_id: int) -> None:
        """Forget the last policy action (it was for the previous episode) and drop older tags from now on."""
        with self._cond:
            self._episode_id = episode_id
            self._policy.clear()
            self._policy_meta = None

    def feed_policy(self, action: Action, received_at: float | None = None) -> None:
        with self._cond:
            if action.episode_id < self._episode_id:
                self.stale_policy_actions += 1
                return
            self._policy.feed(np.asarray(action.data, dtype=np.float32), received_at)
            a = action
            self._policy_meta = _Meta(a.episode_id, a.step, a.source, a.policy_version, a.chunk_seq, a.chunk_index)
            self.policy_version = max(self.policy_version, action.policy_version)
            self._cond.notify_all()

    def feed_intervention(self, action: Action, received_at: float | None = None) -> None:
        with self._cond:
            self._human.feed(np.asarray(action.data, dtype=np.float32), received_at)
            self._interventions += 1
            self._cond.notify_all()

    def wait_for_policy(self, episode_id: int, step: int, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) for a policy action tagged with this episode and step (or a later one)
        or for an intervention (lockstep: one not yet used; else: a new one); True when one came, False on the
        deadline or `wake()`."""

        with self._cond:
            wakes, interventions = self._wakes, self._interventions

            def arrived() -> bool:
                m = self._policy_meta
                tagged = m is not None and (m.episode_id, m.step) >= (episode_id, step)
                # lockstep: an unconsumed intervention is pending (it may have come before the wait began)
                pending = self._human.latest() is not None if self.lockstep else self._interventions != interventions
                return self._wakes != wakes or pending or tagged

            if not self._cond.wait_for(arrived, timeout=max(0.0, timeout_s)):
                return False
            return self._wakes == wakes

    def wake(self) -> None:
        """Wake a `wait_for_policy` early (shutdown, reset request); it returns False."""
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    def choose(self, now: float | None = None) -> GatedAction | None:
        """The action for this period, or None when neither the policy nor a human has a fresh one (hold)."""
        t = self._clock() if now is None else now
        with self._cond:
            policy = self._policy.latest(t)
            human = self._human.latest(t)
            meta = self._policy_meta
            if human is not None and self.lockstep:
                self._human.clear()
        fresh = meta if (meta is not None and policy is not None) else None
        version, seq, index = (fresh.policy_version, fresh.chunk_seq, fresh.chunk_index) if fresh else (0, 0, 0)
        if human is not None:
            return GatedAction(human, True, SOURCE_HUMAN, version, policy, seq, index)
        if policy is None or meta is None:
            return None
        return GatedAction(policy, False, meta.source, version, policy, seq, index)

    def stale_reason(self, now: float | None = None) -> str:
        """Why `choose` returned None, for logs."""
        return f"policy: {self._policy.stale_reason(now)}"
