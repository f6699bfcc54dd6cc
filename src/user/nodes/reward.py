"""`reward` node: sits between a robot and the learner and writes the configured reward into transitions.

Topics (prefix `namespace`, default `/<robot_id>`):

- `transitions` (user/msg/Transition, RELIABLE, subscribed): what the robot streams;
- `transitions/rewarded` (user/msg/Transition, RELIABLE): the same transitions, in the same order, with
  `reward` replaced (and `success`/`terminated`/`truncated` where the source judges the outcome);
- `/human_reward` (user/msg/HumanReward, RELIABLE, subscribed; source `human` only);
- `transitions/replay` -> `transitions/rewarded/replay`: whole episodes a robot re-sends because the learner
  did not acknowledge them (see `user.robot_loop.outbox`). They get the outcome this node already gave
  each step (the latest episodes are remembered, `user.rewards.given`), so a re-sent episode is stored
  exactly as it would have been. An episode this node never rewarded (it restarted) is scored afresh by a
  rule, classifier or task source; a human source cannot judge it again: its steps are not forwarded
  (`unrewarded_replays`, logged) and the robot's outbox gives the episode up loudly.

Sources (`source`, with their settings `user.rewards.source.RewardSourceConfig`):

- `human`: the sum of the pedal/keyboard presses stamped inside the step's time window (0 without one);
  an EPISODE_END press ends the episode at its step (`terminated`, `success` = the press's); the robot's later
  steps of that episode (it stops one or two steps after the press when its `human_reward_topic` is set,
  else at its step limit) are past the end and not forwarded (`after_end`). Transitions
  are held `latency_s` after they arrive so that late presses still land on their step, then released
  in order; see `user.rewards.online` for the windows and clocks.
- `rule`: `RuleReward` (distance of the tool to a target pose) on the next observation.
- `classifier`: `LearnedReward` (the success classifier file at `classifier_path`) on the next observation.
- `task`: the robot's own reward, unchanged (so a deployment can always route through a reward node).

A terminal-mode rule or classifier scores only an episode's last step and there also judges the outcome
(`success`; `terminated` when successful). Every transition and press is checked at the door
(`user.interfaces.validate`: finite values, ranges, ids, this node's robot) and every reward before it is
sent on: a refused one is not used or forwarded, and is counted per cause and logged, rate-limited
(`refusals`; a reward that is not finite also counts as `unscored`). Nothing is dropped silently: malformed messages
(`malformed_messages`), presses with an unknown mode (`bad_presses`) or for another robot
(`foreign_presses`), presses that match no step (`unmatched_presses`), steps whose stamps give no window
(`bad_windows`, released with no human reward) and transitions a rule/classifier cannot score
(`unscored`, not forwarded: a wrong reward would poison the buffer unnoticed) are logged and counted.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from user.bus.base import RELIABLE, Bus
from user.config.strict import ConfigError, setting
from user.interfaces.domain import Transition, transition_from_msg
from user.interfaces.refusals import Refusals
from user.interfaces.validate import InvalidMessageError, check_press, check_reward, check_transition
from user.rewards.base import RewardError
from user.rewards.given import GivenOutcomes
from user.rewards.human import HumanPress
from user.rewards.online import HumanRewarder, Outcome, StepRewarder, is_terminal
from user.rewards.source import RewardSourceConfig
from user.runtime.node import Node

CLOCK_MISMATCH_NS = 60_000_000_000  # a press this far from the robot's latest step means the clocks differ


@dataclass(frozen=True)
class RewardNodeParams(RewardSourceConfig):
    """The source of the rewards and its settings (`RewardSourceConfig`) and the robot and topics it rewards."""

    robot_id: str = setting("franka_sim", "robot whose transitions are rewarded; topics default to /<robot_id>/...")
    namespace: str = setting("", "topic prefix; empty = /<robot_id>")
    input_topic: str = setting("", "transitions in (user/msg/Transition); empty = <namespace>/transitions")
    output_topic: str = setting("", "rewarded transitions out; empty = <namespace>/transitions/rewarded")
    human_topic: str = setting(
        "/human_reward", "source human: presses in (user/msg/HumanReward)", when=("source", "human")
    )
    settle_period_s: float = setting(
        0.02,
        "source human: how often held transitions are checked for release, s",
        min=0.001,
        max=1.0,
        when=("source", "human"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.namespace and not self.namespace.startswith("/"):
            raise ConfigError(f"namespace must start with '/', got {self.namespace!r}")


class RewardNode(Node):
    """Transitions in, rewarded transitions out, in order; a thin adapter over `user.rewards.online`."""

    Params = RewardNodeParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(RewardNodeParams)
        ns = p.namespace or f"/{p.robot_id}"
        self.input_topic = p.input_topic or f"{ns}/transitions"
        self.output_topic = p.output_topic or f"{ns}/transitions/rewarded"
        self._lock = threading.Lock()  # callbacks of one bus never overlap; this guards them against destroy()
        self.refusals = Refusals(self.log)  # transitions, presses and rewards refused (user.interfaces.validate)
        self.received = 0  # transitions decoded
        self.published = 0  # rewarded transitions sent
        self.unscored = 0  # transitions the rule/classifier could not score (logged, not forwarded)
        self.bad_presses = 0  # presses with an unknown mode
        self.foreign_presses = 0  # presses for another robot
        self.presses = 0  # presses accepted
        self.after_end = 0  # steps the robot sent after a person's EPISODE_END step (not forwarded)
        self._given = GivenOutcomes()  # what each step of the latest episodes got, for re-sends
        self.replayed = 0  # re-sent steps forwarded
        self.unrewarded_replays = 0  # re-sent steps a human source never judged (not forwarded)
        self._replay_scorer = StepRewarder(None)
        self.scorer = StepRewarder(None)
        self.human: HumanRewarder[Any] | None = None
        if p.source == "human":
            self.human = HumanRewarder(p.robot_id, p.latency_s, time.monotonic)
        else:
            reward = p.step_reward()
            self.scorer = StepRewarder(reward, decides_outcome=reward is not None and is_terminal(reward))
            replay_reward = p.step_reward()  # its own instance: rewards may keep per-episode state
            self._replay_scorer = StepRewarder(replay_reward, self.scorer.decides_outcome)
        self._pub = self.create_publisher(self.output_topic, "user/msg/Transition", RELIABLE)
        self.create_subscription(self.input_topic, "user/msg/Transition", self._on_transition, RELIABLE)
        self._pub_replay = self.create_publisher(f"{self.output_topic}/replay", "user/msg/Transition", RELIABLE)
        self.create_subscription(f"{self.input_topic}/replay", "user/msg/Transition", self._on_replay, RELIABLE)
        if self.human is not None:
            self.create_subscription(p.human_topic, "user/msg/HumanReward", self._on_press, RELIABLE)
            self.create_timer(p.settle_period_s, self._settle)
        self.log.info("rewarding %s -> %s with source %s", self.input_topic, self.output_topic, p.source)

    @property
    def unmatched_presses(self) -> int:
        return self.human.unmatched if self.human is not None else 0

    @property
    def bad_windows(self) -> int:
        return self.human.bad_windows if self.human is not None else 0

    # ---- bus callbacks ---------------------------------------------------------------------------

    def _admit(self, msg: Any, topic: str) -> Transition | None:
        """The transition `msg` carries when it passes the door (`check_transition`, this node's robot), else None:
        counted and logged (rate-limited), not forwarded."""
        try:
            t = transition_from_msg(msg)
            check_transition(t, robot_id=self.params.robot_id)
        except InvalidMessageError as exc:
            self.refusals.invalid(f"transition on {topic} (episode {msg.episode_id} step {msg.step})", exc)
            return None
        return t

    def _on_transition(self, msg: Any) -> None:
        t = self._admit(msg, self.input_topic)
        if t is None:
            return
        with self._lock:
            self.received += 1
            if self.human is None:
                self._score_now(t, msg)
                return
            unmatched = self.human.unmatched
            problem = self.human.add_transition(t, msg)
            if problem is not None:
                self.log.warning("human reward window: %s", problem)
            self._report_unmatched(unmatched, "fell between steps")
            if self.params.latency_s == 0.0:
                self._release()

    def _score_now(self, t: Transition, msg: Any) -> None:
        try:
            outcome = self.scorer(t)
        except RewardError as exc:
            self.unscored += 1
            self.log.error(
                "episode %d step %d: cannot compute the %s reward (%s); transition not forwarded",
                t.episode_id,
                t.step,
                self.params.source,
                exc,
            )
            return
        self._publish(msg, outcome)

    def _on_replay(self, msg: Any) -> None:
        t = self._admit(msg, f"{self.input_topic}/replay")
        if t is None:
            return
        episode, step = t.episode_id, t.step
        with self._lock:
            if self._given.known(episode, step):
                outcome = self._given.outcome(episode, step)
                if outcome is not None:
                    self._pub_replay.publish(_rewarded(msg, outcome))
                    self.replayed += 1
                return  # given before: its reward was checked then
            if self.human is not None:
                self.unrewarded_replays += 1
                self.log.error(
                    "re-sent episode %d step %d was never judged here (this node restarted?); a person cannot "
                    "judge it again: not forwarded",
                    episode,
                    step,
                )
                return
            try:
                fresh = self._replay_scorer(t)
                check_reward(fresh.reward)
            except RewardError as exc:
                self.unscored += 1
                self.log.error("re-sent episode %d step %d: cannot compute the reward (%s)", episode, step, exc)
                return
            except InvalidMessageError as exc:
                self.unscored += 1
                self.refusals.invalid(f"{self.params.source} reward of re-sent episode {episode} step {step}", exc)
                return
            self._pub_replay.publish(_rewarded(msg, fresh))
            self.replayed += 1

    def _on_press(self, msg: Any) -> None:
        try:
            press = HumanPress.from_msg(msg)
        except RewardError as exc:
            with self._lock:
                self.bad_presses += 1
            self.log.warning("%s; press ignored", exc)
            return
        try:
            check_press(press.reward, int(press.mode))
        except InvalidMessageError as exc:
            with self._lock:
                self.bad_presses += 1
            self.refusals.invalid(f"press from {press.source[:40]!r}", exc, logging.WARNING)
            return
        with self._lock:
            if self.human is None:
                return
            if press.robot_id and press.robot_id != self.params.robot_id:
                self.foreign_presses += 1
                self.log.info(
                    "press from %r is for robot %r, this node rewards %r; ignored",
                    press.source,
                    press.robot_id,
                    self.params.robot_id,
                )
                return
            self.presses += 1
            self._check_clock(press)
            unmatched = self.human.unmatched
            self.human.add_press(press)
            self._report_unmatched(unmatched, f"press from {press.source!r} at {press.stamp_ns} ns")

    def _settle(self) -> None:
        with self._lock:
            self._release()

    # ---- helpers (called with the lock held) ------------------------------------------------------

    def _release(self) -> None:
        if self.human is not None:
            for msg, outcome in self.human.release():
                self._publish(msg, outcome)

    def _check_clock(self, press: HumanPress) -> None:
        last = self.human.last_stamp_ns if self.human is not None else None
        if last is not None and abs(press.stamp_ns - last) > CLOCK_MISMATCH_NS:
            self.log.warning(
                "press from %r is stamped %.1f s from the robot's latest step: are the pedal and the robot on "
                "different clocks (a simulator stamps simulation time)? It will match no step",
                press.source,
                (press.stamp_ns - last) / 1e9,
            )

    def _report_unmatched(self, before: int, what: str) -> None:
        if self.human is not None and self.human.unmatched > before:
            self.log.warning(
                "%d human reward press(es) matched no step (%s: too late, between steps or episodes)",
                self.human.unmatched - before,
                what,
            )

    def _publish(self, msg: Any, outcome: Outcome) -> None:
        episode = int(msg.episode_id)
        try:
            check_reward(outcome.reward)
        except InvalidMessageError as exc:  # never forwarded: a reward that is not finite poisons the learner
            self._given.remember(episode, int(msg.step), None)
            self.unscored += 1
            self.refusals.invalid(f"{self.params.source} reward of episode {episode} step {int(msg.step)}", exc)
            return
        if self._given.ended(episode):
            self._given.remember(episode, int(msg.step), None)
            self.after_end += 1  # the person ended the episode at an earlier step: these steps are past its end
            self.log.info(
                "episode %d step %d: after the episode's end (pressed at an earlier step); not forwarded",
                episode,
                int(msg.step),
            )
            return
        if outcome.terminated and not (msg.terminated or msg.truncated):  # ended here, before the robot stopped
            self._given.end(episode)
        self._given.remember(episode, int(msg.step), outcome)
        self._pub.publish(_rewarded(msg, outcome))
        self.published += 1

    def destroy(self) -> None:
        """Release every held transition now: a shutdown never loses one."""
        with self._lock:
            if self.human is not None:
                for msg, outcome in self.human.flush():
                    self._publish(msg, outcome)


def _rewarded(msg: Any, outcome: Outcome) -> Any:
    """A copy of the transition message with the outcome written in."""
    return dataclasses.replace(
        msg,
        reward=float(outcome.reward),
        success=outcome.success,
        terminated=outcome.terminated,
        truncated=outcome.truncated,
    )
