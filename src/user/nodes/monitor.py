"""`monitor` node: live progress of a run on the console (and in its log file).

Every `period_s` it prints one line: per robot the demo episodes, the online episodes and their recent
success rate (from `/<robot>/episode_events`; an episode in which no policy version >= 1 acted and no human
intervened counts as a demo), and the learner's gradient steps per second, policy version, buffer size and
idle fraction (from `stats_topic`). It only listens, so any number of monitors can watch one run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from user.bus.base import Bus
from user.config.strict import ConfigError, setting
from user.interfaces.episode_events import EpisodeKind, episode_event_from_msg
from user.runtime.node import Node


@dataclass
class MonitorParams:
    robots: list[str] = setting([], "robot ids to follow")
    stats_topic: str = setting("/learner/stats", "the learner's TrainingStats topic")
    period_s: float = setting(5.0, "seconds between progress lines", min=0.1)
    window: int = setting(20, "episodes the recent success rate is computed over", min=1)

    def __post_init__(self) -> None:
        if not self.robots:
            raise ConfigError("robots: list at least one robot id to follow")


@dataclass
class RobotProgress:
    episodes: int = 0  # online episodes (acted by a learned policy, version >= 1)
    demos: int = 0  # episodes acted by a scripted expert or replayed demos (policy version 0)
    successes: int = 0
    interventions: int = 0
    recent: deque[bool] = field(default_factory=deque)
    last_version: int = 0


class MonitorNode(Node):
    """Listens to episode events and training stats; prints a progress line periodically."""

    Params = MonitorParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(MonitorParams)
        self.robots = {r: RobotProgress(recent=deque(maxlen=p.window)) for r in p.robots}
        self.stats: dict[str, float] = {}
        self._rate_mark: tuple[float, float] | None = None  # (monotonic time, gradient steps) at the last line
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
        with self._lock:
            if event.policy_version == 0 and event.interventions == 0:  # no learned policy acted: a demo
                progress.demos += 1
                return
            progress.episodes += 1
            progress.successes += int(event.success)
            progress.interventions += event.interventions
            progress.recent.append(event.success)
            progress.last_version = event.policy_version

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
            parts = []
            for robot, pr in self.robots.items():
                rate = sum(pr.recent) / len(pr.recent) if pr.recent else 0.0
                parts.append(
                    f"{robot}: {pr.episodes} ep, success {rate:.0%} (last {len(pr.recent)}), v{pr.last_version}"
                )
            s = self.stats
            if s:
                parts.append(
                    f"learner: {self._update_rate(s):.1f} steps/s, {s['updates']:.0f} steps, "
                    f"policy v{s['policy_version']:.0f}, buffer {s['buffer']:.0f}, "
                    f"idle {s.get('idle_fraction', 0.0):.0%}"
                )
            else:
                parts.append("learner: no stats yet")
        return " | ".join(parts)

    def _update_rate(self, s: dict[str, float]) -> float:
        """Gradient steps/s since the previous line (a rate-limited learner trains in bursts, so the rate of
        the latest one-second stats message alone is often 0); the message's own rate for the first line."""
        now = time.monotonic()
        previous, self._rate_mark = self._rate_mark, (now, s["updates"])
        if previous is None or now - previous[0] <= 0.0:
            return s["updates_per_second"]
        return (s["updates"] - previous[1]) / (now - previous[0])

    def _report(self) -> None:
        text = self.line()
        self.lines.append(text)
        self.log.info("%s", text)
