"""The monitor's lines: how each robot's latest online episodes went (return, length, success, interventions)
and all robots' together, and the learner's transitions and gradient steps named apart; the learner rate is
taken over the monitor's own period, not from the latest one-second stats message. Lines are short, labelled
and stamped with the local time (no log prefix, no epoch seconds); episode counts go on from the learner's over
a resumed run; the learner falling behind its set update-to-data ratio is said once, and its recovery once."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from test.learner.test_progress import _outcome
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.codec import default_codec
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg
from user.interfaces.stamps import header
from user.learner.progress import ProgressLog
from user.nodes.monitor import MonitorNode
from user.nodes.parts.monitor_text import clock_time

CODEC = default_codec()
STATS = {
    "updates": 100.0,
    "updates_per_second": 7.0,
    "policy_version": 3.0,
    "buffer": 10.0,
    "env_steps": 640.0,
    "idle_fraction": 0.5,
    "buffer_wait_fraction": 0.25,
}


def _end(
    robot: str, ret: float, *, version: int = 2, steps: int = 200, success: bool = False, interventions: int = 0
) -> object:
    event = EpisodeEvent(
        robot, "pendulum", 0, EpisodeKind.END, 1, success, steps, ret, interventions, policy_version=version
    )
    return episode_event_to_msg(event, CODEC)


def _stats(updates: int, env_steps: int, values: dict[str, float], stored: int | None = None) -> Any:
    """A TrainingStats message as the learner sends it (`stored`: transitions in its buffer, else `env_steps`)."""
    return CODEC.msg_class("user/msg/TrainingStats")(
        header=header(0, "", CODEC),
        learner_id="learner",
        updates=updates,
        policy_version=3,
        buffer_transitions=env_steps if stored is None else stored,
        env_steps=env_steps,
        updates_per_second=0.0,
        names=list(values),
        values=np.asarray(list(values.values()), dtype=np.float32),
    )


def test_the_lines_show_the_learner_each_robot_and_all_robots(make_bus: Callable[..., ZenohBus]) -> None:
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm", "cart"], "period_s": 60.0, "window": 2}))
    try:
        assert monitor.block() == [
            "learner: no stats yet",
            "arm: 0 episodes + 0 demos, no episode of a learned policy yet",
            "cart: 0 episodes + 0 demos, no episode of a learned policy yet",
            "all robots: 0 episodes, no episode of a learned policy yet",
        ]
        monitor._on_event(_end("arm", 99.0, version=0))  # no learned policy acted: a demo, not averaged
        for ret in (-300.0, -200.0, -100.0):  # a window of 2: the first leaves it
            monitor._on_event(_end("arm", ret, version=4))
        monitor._on_event(_end("cart", 5.0, steps=50, success=True, interventions=10))
        monitor.stats = dict(STATS)
        learner, arm, cart, pooled = monitor.block()
        detail = monitor.detail()
    finally:
        monitor.destroy()
    assert learner == "learner: 640 transitions, 100 gradient steps (7.0/s), policy version 3, idle 50 %"
    assert arm == "arm: 3 episodes + 1 demo, last 2: 0 % success, return -150.0, 200 steps, 0.0 interventions"
    assert cart == "cart: 1 episode + 0 demos, last 1: 100 % success, return 5.0, 50 steps, 10.0 interventions"
    assert pooled == "all robots: 4 episodes, last 2: 50 % success, return -47.5, 125 steps, 5.0 interventions"
    assert detail == (  # what the lines leave out, for the node's debug log
        "learner: buffer 10 transitions, idle 50 % of the time, 25 % waiting for a batch to be assembled; "
        "arm: last return -100.0, last acted with policy version 4; "
        "cart: last return 5.0, last acted with policy version 2"
    )


def test_learner_rate_is_measured_between_lines(make_bus: Callable[..., ZenohBus]) -> None:
    clock = [100.0]
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm"], "period_s": 60.0}))
    monitor.clock = lambda: clock[0]
    try:
        monitor.stats = dict(STATS)
        assert monitor.block()[0].startswith("learner: 640 transitions, 100 gradient steps (7.0/s)")  # its own
        clock[0] += 0.5
        # a rate-limited learner between bursts: its latest message says 0 steps/s, yet 50 steps were made
        monitor.stats = {**STATS, "updates": 150.0, "updates_per_second": 0.0}
        assert monitor.block()[0].startswith("learner: 640 transitions, 150 gradient steps (100.0/s)")
    finally:
        monitor.destroy()


def test_lines_are_short_labelled_and_stamped_with_the_local_time(
    make_bus: Callable[..., ZenohBus], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: the lines were 300-500 characters behind a log prefix of epoch seconds."""
    robots = ["franka_left", "franka_right"]
    monitor = MonitorNode(make_bus("monitor", {"robots": robots, "period_s": 60.0}))
    wall = 1_700_000_000.25
    monitor.wall_clock = lambda: wall
    try:
        for robot in robots:
            for k in range(20):
                monitor._on_event(_end(robot, -1234.5, version=37, steps=105, success=k % 2 == 0, interventions=3))
        monitor._on_stats(
            _stats(4_961_234, 1_240_456, {"idle_fraction": 0.031, **{f"episodes/{r}": 212 for r in robots}})
        )
        monitor._report()
    finally:
        monitor.destroy()
    out = capsys.readouterr().out.splitlines()
    assert out == monitor.lines and len(out) == 4  # as written: no log prefix
    stamp = time.strftime("%H:%M:%S", time.localtime(wall))
    assert all(line.startswith(f"{stamp} ") for line in out) and clock_time(wall) == stamp
    assert out[0] == f"{stamp} learner: 1.24M transitions, 4.96M gradient steps (0.0/s), policy version 3, idle 3 %"
    assert out[2].startswith(f"{stamp} franka_right: 212 episodes + 0 demos, last 20: 50 % success, return -1234.5")
    assert out[3].startswith(f"{stamp} all robots: 424 episodes, last 20: ")
    assert all(len(line) <= 120 for line in out), [len(line) for line in out]
    assert not any(re.search(r"\d{9}|\[INFO\]|\bv\d|\bep\b|batch feed", line) for line in out), out


def test_episode_counts_go_on_from_the_learners_over_a_resumed_run(
    make_bus: Callable[..., ZenohBus], tmp_path: Path
) -> None:
    """Issue 31: on resume the monitor counted from 0 while the learner went on. The learner's stats carry each
    robot's stored episodes (here from a real progress log); a robot's count is the larger of those and its own."""
    progress = ProgressLog(tmp_path, plot_every_s=1e9)
    try:
        for k in range(212):
            progress.episode(_outcome("arm", k, -1.0, is_demo=k < 10), env_steps=k)
        counts = progress.episode_counts()
    finally:
        progress.close()
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm", "cart"], "period_s": 60.0}))
    try:
        monitor._on_stats(_stats(1000, 5000, counts))
        resumed = monitor.block()[1]
        monitor._on_event(_end("arm", -2.0, version=5))  # the first episode after the resume
        arm, cart, pooled = monitor.block()[1:]
        for _ in range(3):  # episodes the learner has not stored yet: the monitor's own count is larger
            monitor._on_event(_end("cart", 1.0))
        cart_after = monitor.block()[2]
    finally:
        monitor.destroy()
    assert resumed == "arm: 202 episodes + 10 demos, none ended since the monitor started"
    assert arm.startswith("arm: 202 episodes + 10 demos, last 1: ")
    assert cart.startswith("cart: 0 episodes + 0 demos") and cart_after.startswith("cart: 3 episodes + 0 demos")
    assert pooled.startswith("all robots: 202 episodes")


def test_the_learner_falling_behind_is_said_once_and_its_recovery_once(make_bus: Callable[..., ZenohBus]) -> None:
    """Issue 31: a learner at 1.69 gradient steps per transition against 4.0 set said so only at exit."""
    monitor = MonitorNode(make_bus("monitor", {"robots": ["arm"], "period_s": 60.0, "pace_window": 200}))
    steps, env = [0], [0]

    def run(transitions: int, ratio: float, reports: int = 3) -> list[str]:
        """The learner stores `transitions` and makes `ratio` gradient steps for each; the lines reported. The
        transitions received run ahead of those stored by an episode in progress, which it cannot train on yet."""
        before = len(monitor.lines)
        for _ in range(reports):
            for k in range(transitions // reports // 20):  # a stats message every 20 transitions
                env[0] += 20
                steps[0] += round(20 * ratio)
                in_progress = 90 * (k % 3)
                monitor._on_stats(_stats(steps[0], env[0] + in_progress, {"updates_per_step_set": 4.0}, stored=env[0]))
            monitor._report()
        return [line[9:] for line in monitor.lines[before:] if "learner " in line]

    try:
        assert run(300, 0.0) == []  # warm-up: no training before min_transitions is not falling behind
        assert run(600, 4.0) == []  # holding the set ratio
        assert run(600, 1.7) == [
            "learner behind: 1.7 gradient steps per transition over the last 200 transitions, 4.0 set (42 %)"
        ]  # once, not every period
        assert run(600, 3.8) == []  # better, still short of it: nothing new
        assert run(600, 4.0) == [
            "learner caught up: 4.0 gradient steps per transition over the last 200 transitions, 4.0 set (100 %)"
        ]
        assert "4.0 per transition" in monitor.block()[0]
    finally:
        monitor.destroy()
