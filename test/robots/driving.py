"""One control period as the watchdog tests drive a robot: step with the fresh action, else hold (the node's own
loop is `user.robot_loop.ControlLoop` through an `ActionGate`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from user.robots.base import Robot, StepResult
from user.robots.watchdog import ActionWatchdog


def watchdog_for_rate(rate_hz: float, clock: Callable[[], float] = time.monotonic) -> ActionWatchdog:
    """A watchdog whose deadline is one control period: the robot holds within two periods."""
    return ActionWatchdog(1.0 / rate_hz, clock)


def drive_once(robot: Robot, watchdog: ActionWatchdog, now: float | None = None) -> StepResult:
    """One control period: step the robot with the fresh action, or hold when there is none."""
    action = watchdog.latest(now)
    if action is None:
        return robot.hold(watchdog.stale_reason(now))
    return robot.step(action)
