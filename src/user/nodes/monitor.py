"""`monitor` node: live progress of a run on the console (and in its log file).

Every `period_s` it prints one line: per robot the online and demo episodes and, over its latest `window`
online episodes, the mean and last return, mean length, success rate and interventions per episode (from
`/<robot>/episode_events`; an episode in which no policy version >= 1 acted and no human intervened counts as
a demo); the same pooled over all robots when it follows more than one; then the learner's env steps
(transitions received), gradient steps per second and in all, policy version, buffer size and idle fraction
(from `stats_topic`). It only listens, so any number of monitors can watch one run.

    arm: 40 ep + 2 demo, last 20: return -312.4 (last -150.2), length 200, success 0%, interventions 0.0/ep, v12
    | learner: 8400 env steps, 9.9 grad steps/s, 8200 grad steps, policy v12, buffer 8400, idle 3%
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from user.buffer.episode_window import EpisodeOutcome, RecentEpisodes, WindowStats
from user.bus.base import Bus
from user.config.strict import ConfigError, setting
from user.interfaces.episode_events import EpisodeKind, episode_event_from_msg
from user.runtime.node import Node


@dataclass
class MonitorParams:
    robots: list[str] = setting([], "robot ids to follow")
    stats_topic: str = setting("/learner/stats", "the learner's TrainingStats topic")
    period_s: float = setting(5.0, "seconds between progress lines", min=0.1)
    window: int = setting(20, "online episodes the recent return, length, success and interventions are over", min=1)

    def __post_init__(self) -> None:
        if not self.robots:
            raise ConfigError("robots: list at least one robot id to follow")


@dataclass
class RobotProgress:
    episodes: int = 0  # online episodes (acted by a learned policy, version >= 1)
    demos: int = 0  # episodes acted by a scripted expert or replayed demos (policy version 0)
    last_version: int = 0


class MonitorNode(Node):
    """Listens to episode events and training stats; prints a progress line periodically."""

    Params = MonitorParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(MonitorParams)
        self.robots = {r: RobotProgress() for r in p.robots}
        self.recent = RecentEpisodes(p.window)  # online episodes, per robot and pooled
        self.stats: dict[str, float] = {}
        self._rate_mark: tuple[float, float] | None = None  # (monotonic time, gradient steps) at the last line
        self.clock: Callable[[], float] = time.monotonic  # what the learner rate is measured with
        self.lines: list[str] = []  # every line printed, for tests
        self._lock = threading.Lock()
        for robot in p.robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
        self.create_subscription(p.stats_topic, "user/msg/TrainingStats", self._on_stats)
        self.create_timer(p.period_s, self._report)

    def _on_event(self, msg: Any) -> None:
        event = episode_event_from_msg(msg)
        progress = self.robots.get(event.robot_id)
        if progress is None or event.kind is not EpisodeKind.END:
            return
        demo = event.policy_version == 0 and event.interventions == 0  # no learned policy acted
        outcome = EpisodeOutcome(
            event.robot_id,
            event.episode_id,
            event.steps,
            event.episode_return,
            event.success,
            event.interventions,
            demo,
        )
        with self._lock:
            if demo:
                progress.demos += 1
                return
            progress.episodes += 1
            progress.last_version = event.policy_version
            self.recent.add(outcome)

    def _on_stats(self, msg: Any) -> None:
        values = dict(zip(msg.names, (float(v) for v in msg.values), strict=False))
        with self._lock:
            self.stats = {
                **values,
                "updates": float(msg.updates),
                "policy_version": float(msg.policy_version),
                "buffer": float(msg.buffer_transitions),
                "env_steps": float(msg.env_steps),
                "updates_per_second": float(msg.updates_per_second),
            }

    def line(self) -> str:
        with self._lock:
            windows = self.recent.robots()
            parts = [
                f"{robot}: {pr.episodes} ep + {pr.demos} demo, {_window_text(windows.get(robot))}, v{pr.last_version}"
                for robot, pr in self.robots.items()
            ]
            if len(self.robots) > 1:
                online = sum(pr.episodes for pr in self.robots.values())
                parts.append(f"all robots: {online} ep, {_window_text(self.recent.pooled())}")
            s = self.stats
            if s:
                parts.append(
                    f"learner: {s.get('env_steps', 0.0):.0f} env steps, {self._update_rate(s):.1f} grad steps/s, "
                    f"{s['updates']:.0f} grad steps, policy v{s['policy_version']:.0f}, buffer {s['buffer']:.0f}, "
                    f"idle {s.get('idle_fraction', 0.0):.0%} (batch feed {s.get('buffer_wait_fraction', 0.0):.0%})"
                )
            else:
                parts.append("learner: no stats yet")
        return " | ".join(parts)

    def _update_rate(self, s: dict[str, float]) -> float:
        """Gradient steps/s since the previous line (a rate-limited learner trains in bursts, so the rate of
        the latest one-second stats message alone is often 0); the message's own rate for the first line."""
        now = self.clock()
        previous, self._rate_mark = self._rate_mark, (now, s["updates"])
        if previous is None or now - previous[0] <= 0.0:
            return s["updates_per_second"]
        return (s["updates"] - previous[1]) / (now - previous[0])

    def _report(self) -> None:
        text = self.line()
        self.lines.append(text)
        self.log.info("%s", text)


def _window_text(stats: WindowStats | None) -> str:
    """A window of online episodes in a few words."""
    if stats is None:
        return "no online episode yet"
    return (
        f"last {stats.episodes}: return {stats.mean_return:.1f} (last {stats.last_return:.1f}), "
        f"length {stats.mean_length:.0f}, success {stats.success_rate:.0%}, "
        f"interventions {stats.mean_interventions:.1f}/ep"
    )
