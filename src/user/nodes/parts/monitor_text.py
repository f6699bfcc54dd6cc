"""The monitor's lines in words: short (about 110 characters with two robots named like `franka_right`), each
starting with the local wall-clock time and naming what it is about, counts above 10 000 in thousands (`12.4k`).

    12:03:41 learner: 12.4k transitions, 49.6k gradient steps (99.2/s, 4.0 per transition), policy version 37, idle 3 %
    12:03:41 franka_left: 212 episodes + 10 demos, last 20: 90 % success, return -120.3, 98 steps, 0.1 interventions

`learner`: transitions received from the robots, gradient steps (optimiser steps) made, their rate since the
previous line and per transition over the pace window (the update-to-data ratio), the newest policy version
and the share of the time the learner had nothing to train on. A robot: episodes a learned policy acted in, plus
demonstrations (a scripted expert acted, no human intervened); then, over its latest online episodes (`last 20`),
the share that succeeded and, per episode on average, the return, the length in steps and the number of steps a
human intervened in.
"""

from __future__ import annotations

import time

from user.buffer.episode_window import WindowStats


def clock_time(wall: float) -> str:
    """Seconds since the epoch as local HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(wall))


def amount(n: float) -> str:
    """A count in a few characters: 640, 9999, 12.4k, 3.21M."""
    if n < 10_000:
        return f"{n:.0f}"
    if n < 1_000_000:
        return f"{n / 1e3:.1f}k"
    return f"{n / 1e6:.2f}M"


def percent(fraction: float) -> str:
    return f"{100.0 * fraction:.0f} %"


def plural(n: float, word: str) -> str:
    return f"{amount(n)} {word}" + ("" if n == 1 else "s")


def window_text(stats: WindowStats | None, episodes: int = 0) -> str:
    """A robot's (or all robots') latest online episodes in a few words (`episodes`: online ones in the run; a
    monitor started on a resumed run has seen none of them end)."""
    if stats is None:
        return "none ended since the monitor started" if episodes else "no episode of a learned policy yet"
    return (
        f"last {stats.episodes}: {percent(stats.success_rate)} success, return {stats.mean_return:.1f}, "
        f"{stats.mean_length:.0f} steps, {stats.mean_interventions:.1f} interventions"
    )


def robot_text(label: str, episodes: int, demos: int, stats: WindowStats | None) -> str:
    return f"{label}: {plural(episodes, 'episode')} + {plural(demos, 'demo')}, {window_text(stats, episodes)}"


def pooled_text(episodes: int, stats: WindowStats | None) -> str:
    return f"all robots: {plural(episodes, 'episode')}, {window_text(stats, episodes)}"


def learner_text(stats: dict[str, float], rate: float, ratio: float | None) -> str:
    """The learner's line from its stats message (`rate`: gradient steps/s; `ratio`: per transition, if known)."""
    if not stats:
        return "learner: no stats yet"
    pace = f"{rate:.1f}/s" + ("" if ratio is None else f", {ratio:.1f} per transition")
    return (
        f"learner: {plural(stats['env_steps'], 'transition')}, {plural(stats['updates'], 'gradient step')} ({pace}), "
        f"policy version {stats['policy_version']:.0f}, idle {percent(stats.get('idle_fraction', 0.0))}"
    )


def learner_detail(stats: dict[str, float]) -> str:
    """What the learner's line leaves out (for the node's debug log)."""
    if not stats:
        return "learner: no stats yet"
    return (
        f"learner: buffer {plural(stats['buffer'], 'transition')}, idle {percent(stats.get('idle_fraction', 0.0))} "
        f"of the time, {percent(stats.get('buffer_wait_fraction', 0.0))} waiting for a batch to be assembled"
    )


def robot_detail(label: str, version: int, stats: WindowStats | None) -> str:
    """What a robot's line leaves out (for the node's debug log)."""
    last = "" if stats is None else f"last return {stats.last_return:.1f}, "
    return f"{label}: {last}last acted with policy version {version}"
