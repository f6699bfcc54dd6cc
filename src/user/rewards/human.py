"""Human reward: pedal/keyboard presses (user/msg/HumanReward) attached to the step they were pressed in.

Each control step covers a time window `[start_ns, end_ns)` on the robot clock; a press belongs to the step
whose window contains its stamp. Presses arrive late (over the network, after the step closed), so the
aggregator holds each closed step for `latency_ns` before settling it. A STEP press adds its reward to
its step; an EPISODE_END press gives its reward to its step and marks the episode as ended there (with
the press's success flag). Presses older than every held step, or for another robot, are counted as
unmatched and dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from user.interfaces.stamps import from_time
from user.rewards.base import RewardError

_log = logging.getLogger(__name__)


class PressMode(IntEnum):
    """user/msg/HumanReward MODE_* constants."""

    STEP = 0
    EPISODE_END = 1


@dataclass(frozen=True)
class HumanPress:
    """One press, as carried by user/msg/HumanReward."""

    stamp_ns: int  # when it was pressed (robot clock)
    reward: float
    mode: PressMode = PressMode.STEP
    success: bool = False
    robot_id: str = ""  # empty: any robot
    source: str = ""  # device name

    @staticmethod
    def from_msg(msg: Any) -> HumanPress:
        try:
            mode = PressMode(int(msg.mode))
        except ValueError:
            raise RewardError(f"human reward from {msg.source!r} has unknown mode {msg.mode}") from None
        return HumanPress(
            from_time(msg.header.stamp), float(msg.reward), mode, bool(msg.success), str(msg.robot_id), str(msg.source)
        )


@dataclass(frozen=True)
class StepWindow:
    """The time a control step covered."""

    step: int
    start_ns: int  # inclusive
    end_ns: int  # exclusive

    def __post_init__(self) -> None:
        if self.end_ns <= self.start_ns:
            raise RewardError(f"step {self.step}: window end {self.end_ns} is not after its start {self.start_ns}")

    def contains(self, stamp_ns: int) -> bool:
        return self.start_ns <= stamp_ns < self.end_ns


@dataclass
class HumanStepReward:
    """The human reward settled for one step."""

    step: int
    reward: float = 0.0
    presses: int = 0
    episode_end: bool = False  # an EPISODE_END press fell in this step
    success: bool = False  # that press said the task succeeded
    stamps_ns: list[int] = field(default_factory=list)  # stamps of the presses attached


def _apply(target: HumanStepReward, press: HumanPress) -> None:
    target.reward += press.reward
    target.presses += 1
    target.stamps_ns.append(press.stamp_ns)
    if press.mode is PressMode.EPISODE_END:
        target.episode_end = True
        target.success = target.success or press.success


class HumanRewardAggregator:
    """Online: collects presses and step windows of one robot, settles steps once late presses had time."""

    def __init__(self, robot_id: str = "", latency_ns: int = 200_000_000) -> None:
        if latency_ns < 0:
            raise RewardError("latency_ns must be >= 0")
        self.robot_id = robot_id
        self.latency_ns = latency_ns
        self.unmatched = 0
        self._held: list[tuple[StepWindow, HumanStepReward]] = []
        self._early: list[HumanPress] = []  # presses newer than every held step
        self._settled_ns = -1  # end of the last settled window: older presses are too late

    def add_press(self, press: HumanPress) -> None:
        if press.robot_id and self.robot_id and press.robot_id != self.robot_id:
            self.unmatched += 1
            return
        for window, reward in self._held:
            if window.contains(press.stamp_ns):
                _apply(reward, press)
                return
        if press.stamp_ns < self._settled_ns or (self._held and press.stamp_ns < self._held[0][0].start_ns):
            self.unmatched += 1
            _log.warning("human reward from %r at %d ns came too late for its step", press.source, press.stamp_ns)
            return
        self._early.append(press)

    def close_step(self, window: StepWindow) -> None:
        """A step finished; it covered `window`."""
        if self._held and window.start_ns < self._held[-1][0].end_ns:
            raise RewardError(f"step {window.step} overlaps the step before it")
        reward = HumanStepReward(window.step)
        keep = []
        for press in self._early:
            if window.contains(press.stamp_ns):
                _apply(reward, press)
            elif press.stamp_ns < window.start_ns:
                self.unmatched += 1  # fell in a gap between steps
            else:
                keep.append(press)
        self._early = keep
        self._held.append((window, reward))

    def settle(self, now_ns: int) -> list[HumanStepReward]:
        """Steps whose window ended at least `latency_ns` before `now_ns`, in order, with their presses."""
        done = [r for w, r in self._held if w.end_ns + self.latency_ns <= now_ns]
        if done:
            self._settled_ns = self._held[len(done) - 1][0].end_ns
            self._held = self._held[len(done) :]
        return done

    def flush(self) -> list[HumanStepReward]:
        """Settle every held step now (episode end); presses not yet matched are counted and dropped."""
        done = [r for _, r in self._held]
        if self._held:
            self._settled_ns = self._held[-1][0].end_ns
        self._held = []
        self.unmatched += len(self._early)
        self._early = []
        return done
