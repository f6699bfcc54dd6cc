"""`monitor` node: live progress of a run on the console (and in its log file).

Every `period_s` it writes a few short lines, each starting with the local time (see `user.nodes.parts.monitor_text`
for every figure): the learner's (from `stats_topic`), one per robot (from `/<robot>/episode_events`; an episode
in which no policy version >= 1 acted and no human intervened counts as a demo) and, following more than one
robot, all robots' together:

    12:03:41 learner: 12.4k transitions, 49.6k gradient steps (99.2/s, 4.0 per transition), policy version 37, idle 3 %
    12:03:41 franka_left: 212 episodes + 10 demos, last 20: 90 % success, return -120.3, 98 steps, 0.1 interventions
    12:03:41 franka_right: 205 episodes + 10 demos, last 20: 85 % success, return -130.1, 99 steps, 0.0 interventions
    12:03:41 all robots: 417 episodes, last 20: 88 % success, return -125.0, 98 steps, 0.1 interventions

and, once each time it happens, that the learner fell behind its set update-to-data ratio or caught up again
(`user.nodes.parts.monitor_pace`):

    12:03:41 learner behind: 1.7 gradient steps per transition over the last 2048 transitions, 4.0 set (42 %)

The lines are written as they are (no log prefix) to standard output, which `user bringup` copies to the
console (`output: screen`) and the node's log file; what they leave out (the learner's buffer and batch
waits, each robot's last return and policy version) goes to the node's debug log. Episode counts go on over
a resumed run (and a restarted monitor): the learner's stats carry each robot's stored episodes over the whole
run (`episodes/<robot>`, `demos/<robot>`, counted from its buffer), and a robot's count is the larger of those
and the episodes this monitor saw end. It only listens, so any number of monitors can watch one run, on any
machine, without the run directory.

With `admit`, robots that join while the run goes on get their line when they join (`user.fleet`: announced robots
whose ids match a pattern); one whose announcement has been gone `leave_after_s` keeps its line, marked gone:

    12:03:41 franka_right: 205 episodes + 10 demos, last 20: 85 % success, ... (gone since 12:02:10)
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from user.buffer.episode_window import EpisodeOutcome, RecentEpisodes
from user.bus.base import Bus
from user.config.strict import ConfigError, setting
from user.fleet import watch_fleet
from user.fleet.settings import ADMIT_HELP, DEFAULT_LEAVE_AFTER_S, LEAVE_HELP
from user.interfaces.episode_events import EpisodeKind, episode_event_from_msg
from user.nodes.parts.monitor_pace import PaceWatch
from user.nodes.parts.monitor_text import (
    clock_time,
    learner_detail,
    learner_text,
    pooled_text,
    robot_detail,
    robot_text,
)
from user.runtime.node import Node

_console = logging.getLogger("user.monitor.console")  # the progress lines, written as they are


class _Stdout(logging.Handler):
    """Each record's message alone on the current standard output (looked up at each line)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(record.getMessage() + "\n")
            sys.stdout.flush()
        except Exception:
            self.handleError(record)


def console() -> logging.Logger:
    """The logger of the progress lines: plain lines on standard output, never the log format's prefix."""
    if not any(isinstance(h, _Stdout) for h in _console.handlers):
        _console.addHandler(_Stdout())
        _console.setLevel(logging.INFO)
        _console.propagate = False
    return _console


@dataclass
class MonitorParams:
    robots: list[str] = setting([], "robot ids to follow (from the start to the end)")
    admit: list[str] = setting([], ADMIT_HELP)
    leave_after_s: float = setting(DEFAULT_LEAVE_AFTER_S, LEAVE_HELP, min=0.0)
    stats_topic: str = setting("/learner/stats", "the learner's TrainingStats topic")
    period_s: float = setting(5.0, "seconds between progress reports", min=0.1)
    window: int = setting(20, "online episodes the recent return, length, success and interventions are over", min=1)
    pace_window: int = setting(
        2000,
        "stored transitions over which the learner's gradient steps per transition are compared with the set ratio "
        "(many episodes: the learner trains on an episode once it is stored)",
        min=1,
    )

    def __post_init__(self) -> None:
        if not self.robots and not self.admit:
            raise ConfigError("robots: list at least one robot id to follow (or admit: robots that may join)")


@dataclass
class RobotProgress:
    episodes: int = 0  # online episodes seen to end (acted by a learned policy, version >= 1)
    demos: int = 0  # episodes seen to end acted by a scripted expert or replayed demos (policy version 0)
    last_version: int = 0


class MonitorNode(Node):
    """Listens to episode events and training stats; writes progress lines periodically."""

    Params = MonitorParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(MonitorParams)
        self.robots = {r: RobotProgress() for r in p.robots}
        self.recent = RecentEpisodes(p.window)  # online episodes, per robot and pooled
        self.stats: dict[str, float] = {}
        self.pace = PaceWatch(p.pace_window)
        self._rate_mark: tuple[float, float] | None = None  # (monotonic time, gradient steps) at the last line
        self.clock: Callable[[], float] = time.monotonic  # what the learner rate is measured with
        self.wall_clock: Callable[[], float] = time.time  # what lines are stamped with (as local time)
        self.lines: list[str] = []  # every line written, for tests
        self._console = console()
        self._lock = threading.Lock()
        self.gone: dict[str, float] = {}  # robot that joined at run time and left -> when (wall clock)
        for robot in p.robots:
            self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)
        self.create_subscription(p.stats_topic, "user/msg/TrainingStats", self._on_stats)
        self.create_timer(p.period_s, self._report)
        # robots joining and leaving while the run goes on (`admit`)
        self.fleet = watch_fleet(self, p, None, self._follow, self._left)

    def _follow(self, robot: str) -> list[Any]:
        """A robot joined: its line from now on (its counts kept from an earlier stay)."""
        with self._lock:
            self.robots.setdefault(robot, RobotProgress())
            self.gone.pop(robot, None)
        return [self.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)]

    def _left(self, robot: str) -> None:
        with self._lock:
            self.gone[robot] = self.wall_clock()

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
            self.pace.add(int(msg.updates), int(msg.buffer_transitions))

    def _counts(self, robot: str) -> tuple[int, int]:
        """Robot `robot`'s online episodes and demos, over the whole run where the learner's stats say so (the
        caller holds the lock)."""
        seen, s = self.robots[robot], self.stats
        return (
            max(seen.episodes, int(s.get(f"episodes/{robot}", 0.0))),
            max(seen.demos, int(s.get(f"demos/{robot}", 0.0))),
        )

    def block(self) -> list[str]:
        """This period's lines, without their time: the learner's, each robot's, all robots' together."""
        with self._lock:
            s, windows = dict(self.stats), self.recent.robots()
            measured = self.pace.ratio()
            lines = [learner_text(s, self._update_rate(s) if s else 0.0, None if measured is None else measured[0])]
            counts = {robot: self._counts(robot) for robot in self.robots}
            lines += [
                robot_text(robot, *counts[robot], windows.get(robot)) + self._gone(robot) for robot in self.robots
            ]
            if len(self.robots) > 1:
                lines.append(pooled_text(sum(online for online, _ in counts.values()), self.recent.pooled()))
        return lines

    def _gone(self, robot: str) -> str:
        """ " (gone since HH:MM:SS)" for a robot that left (the caller holds the lock), else nothing."""
        since = self.gone.get(robot)
        return "" if since is None else f" (gone since {clock_time(since)})"

    def detail(self) -> str:
        """What the lines leave out: the learner's buffer and batch waits, each robot's last return and version."""
        with self._lock:
            windows = self.recent.robots()
            parts = [learner_detail(self.stats)]
            parts += [robot_detail(r, pr.last_version, windows.get(r)) for r, pr in self.robots.items()]
        return "; ".join(parts)

    def _update_rate(self, s: dict[str, float]) -> float:
        """Gradient steps/s since the previous line (a rate-limited learner trains in bursts, so the rate of
        the latest one-second stats message alone is often 0); the message's own rate for the first line."""
        now = self.clock()
        previous, self._rate_mark = self._rate_mark, (now, s["updates"])
        if previous is None or now - previous[0] <= 0.0:
            return s["updates_per_second"]
        return (s["updates"] - previous[1]) / (now - previous[0])

    def _report(self) -> None:
        with self._lock:
            change = self.pace.check(self.stats.get("updates_per_step_set", 0.0))
        stamp = clock_time(self.wall_clock())
        for text in ([change.text()] if change is not None else []) + self.block():
            line = f"{stamp} {text}"
            self.lines.append(line)
            self._console.info("%s", line)
        self.log.debug("%s", self.detail())

    def destroy(self) -> None:
        if self.fleet is not None:
            self.fleet.close()
