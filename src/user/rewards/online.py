"""Online rewards over a stream of transitions: the ROS-free core of the `reward` node.

A reward source turns each incoming `Transition` into an `Outcome` (the reward and episode flags to write
back). `StepRewarder` scores a transition on its own, at once (rule, classifier, task). `HumanRewarder`
holds transitions until late pedal presses had time to arrive, then releases them in arrival order.

Human step windows. The robot loop stamps a transition with the time the step's resulting state was read
(`Transition.stamp_ns` == `next_observation.stamp_ns`) and its `observation` with the time the step's
starting state was read. A step therefore covers `[start, transition stamp)`, where `start` is the previous
transition's stamp when that was the previous step of the same episode, else the observation stamp (the
first step of an episode). Chaining windows on the previous stamp, rather than always using the
observation stamp, keeps the time the loop spent holding (no action) before a step inside that step, so
no press falls into a gap between two steps of one episode. Press stamps and transition stamps must be on
the same clock (the robot host's clock; a simulator stamping simulation time never matches wall-clock
presses).

Settling is on the local monotonic clock: a transition is released `latency_s` after it *arrived*, so a
press may arrive up to `latency_s` after its step's transition did, whatever the offset between the
robot's clock and this host's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from user.interfaces.domain import Transition
from user.interfaces.images import ImageCodecError
from user.rewards.base import Reward, RewardError, RewardMode, RewardStep, RewardValue
from user.rewards.human import HumanPress, HumanRewardAggregator, HumanStepReward, StepWindow

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What a reward source writes into a transition."""

    reward: float
    success: bool
    terminated: bool
    truncated: bool

    @staticmethod
    def unchanged(t: Transition) -> Outcome:
        return Outcome(t.reward, t.success, t.terminated, t.truncated)

    @staticmethod
    def with_reward(t: Transition, reward: float) -> Outcome:
        """`t`'s own flags, a new reward."""
        return Outcome(reward, t.success, t.terminated, t.truncated)

    @staticmethod
    def ending(reward: float, success: bool) -> Outcome:
        """The episode ends here, as a true end of the MDP (no bootstrapping)."""
        return Outcome(reward, success, True, False)


class StepRewarder:
    """Scores each transition's next observation with a `Reward`, at once.

    `decides_outcome`: in terminal mode the reward also judges success on an episode's last step (it then
    sets `success`, and `terminated` when successful); otherwise only the reward is replaced.
    `reward=None` passes transitions through unchanged (the robot's own task reward).
    """

    def __init__(self, reward: Reward | None, decides_outcome: bool = False) -> None:
        self.reward = reward
        self.decides_outcome = decides_outcome
        self._episode: tuple[str, int] | None = None

    def __call__(self, t: Transition) -> Outcome:
        """The outcome of `t`; raises `RewardError` when the step cannot be scored."""
        if self.reward is None:
            return Outcome.unchanged(t)
        if self._episode != (t.robot_id, t.episode_id):
            self._episode = (t.robot_id, t.episode_id)
            self.reward.reset()
        try:
            step = RewardStep.from_observation(t.next_observation, last=t.done, decode=self.reward.needs_images)
            value: RewardValue = self.reward(step)
        except ImageCodecError as exc:
            raise RewardError(f"cannot decode the images of the next observation: {exc}") from exc
        if self.decides_outcome and t.done:
            terminated = t.terminated or value.success
            return Outcome(value.reward, value.success, terminated, t.truncated and not terminated)
        return Outcome.with_reward(t, value.reward)


def is_terminal(reward: Reward) -> bool:
    """Whether `reward` scores only an episode's last step."""
    return getattr(reward, "mode", RewardMode.STEP) is RewardMode.TERMINAL


@dataclass
class _Held(Generic[T]):
    item: T  # what the caller gets back (the node: the decoded message)
    transition: Transition
    window: StepWindow | None  # None: no valid window, released with no human reward
    due_s: float  # local monotonic time at which it is released


def human_outcome(t: Transition, settled: HumanStepReward | None) -> Outcome:
    """The sum of the step's presses as its reward; an EPISODE_END press ends the episode there."""
    if settled is None:
        return Outcome.with_reward(t, 0.0)
    if settled.episode_end:
        return Outcome.ending(settled.reward, settled.success)
    return Outcome.with_reward(t, settled.reward)


class HumanRewarder(Generic[T]):
    """Human presses attached to held transitions; released in arrival order, `latency_s` after arrival."""

    def __init__(self, robot_id: str, latency_s: float, clock: Callable[[], float]) -> None:
        if latency_s < 0:
            raise RewardError("latency_s must be >= 0")
        self.latency_s = latency_s
        self._latency_ns = round(latency_s * 1e9)
        self.aggregator = HumanRewardAggregator(robot_id, self._latency_ns)
        self._clock = clock
        self._held: deque[_Held[T]] = deque()
        self._prev: tuple[int, int, int] | None = None  # (episode id, step, stamp) of the last windowed step
        self.bad_windows = 0  # transitions whose stamps gave no valid window (released with reward 0)

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the newest step windowed so far (robot clock)."""
        return self._prev[2] if self._prev is not None else None

    @property
    def unmatched(self) -> int:
        """Presses that fell in no step (too late, between steps or episodes, or for another robot)."""
        return self.aggregator.unmatched

    def add_press(self, press: HumanPress) -> None:
        self.aggregator.add_press(press)

    def window(self, t: Transition) -> StepWindow:
        """The time `t`'s step covered (see the module doc); raises `RewardError` if its stamps give none."""
        prev = self._prev
        chained = prev is not None and prev[0] == t.episode_id and prev[1] == t.step - 1
        start = prev[2] if prev is not None and chained else t.observation.stamp_ns
        return StepWindow(t.step, start, t.stamp_ns)

    def add_transition(self, t: Transition, item: T) -> str | None:
        """Hold `t` until its presses settled; returns what was wrong with its stamps, if anything."""
        due_s = self._clock() + self.latency_s
        try:
            window = self.window(t)
            self.aggregator.close_step(window)
        except RewardError as exc:
            self.bad_windows += 1
            self._held.append(_Held(item, t, None, due_s))
            return f"episode {t.episode_id} step {t.step}: {exc}; released with no human reward"
        self._prev = (t.episode_id, t.step, t.stamp_ns)
        self._held.append(_Held(item, t, window, due_s))
        return None

    def release(self) -> list[tuple[T, Outcome]]:
        """Transitions whose hold is over, oldest first, with their outcomes."""
        now = self._clock()
        due = 0
        while due < len(self._held) and self._held[due].due_s <= now:
            due += 1
        last = next((h.window for h in reversed(list(self._held)[:due]) if h.window is not None), None)
        settled = self.aggregator.settle(last.end_ns + self._latency_ns) if last is not None else []
        return self._pop(due, settled)

    def flush(self) -> list[tuple[T, Outcome]]:
        """Release everything held now (shutdown); presses still unmatched are counted and dropped."""
        return self._pop(len(self._held), self.aggregator.flush())

    def _pop(self, count: int, settled: list[HumanStepReward]) -> list[tuple[T, Outcome]]:
        rewards = iter(settled)
        out = []
        for _ in range(count):
            held = self._held.popleft()
            step = next(rewards, None) if held.window is not None else None
            if held.window is not None and (step is None or step.step != held.transition.step):
                raise RewardError(f"internal: human rewards out of step with held step {held.transition.step}")
            out.append((held.item, human_outcome(held.transition, step)))
        return out
