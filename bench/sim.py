"""Benchmark of the simulated FR3 (`SimFrankaRobot`): stepping rate with and without cameras, real-time pacing.

Everything is measured in one run, trials interleaved round by round and medians taken, so machine noise
hits every configuration alike: read the ratios, not the absolute numbers. One `step` = one 10 Hz control
period = 50 physics steps at 500 Hz with the operational-space controller in the loop. The arm follows a
scripted figure-eight of actions in the peg-insertion scene (peg held in the gripper), resetting every
100 steps (resets are not timed).

1. Fast mode steps/s (wall clock, and per CPU second of this process, which contention does not change):
   no cameras; two 128x128 cameras (wrist + front) rendered inline every step, with
   low-poly and with full visual meshes; two cameras on the render thread (the control loop never waits
   for them; frames rendered per step shown). Targets: >= 200 steps/s without cameras; with two cameras
   (inline, low-poly) at least real time for one robot at 10 Hz.
2. Real-time mode at 10 Hz, two cameras on the render thread: lateness of each wake-up after its
   deadline, p50 / p99 / max, and overruns. Target: p99 <= 5 ms.

Run: MUJOCO_GL=egl python3 bench/sim.py [--quick] [--rounds N] [--steps N] [--rt-steps N]
     (default ~2 min on 2 cores, --quick ~40 s)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np

from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig

RATE_HZ = 10.0
STEPS_TARGET = 200.0  # fast mode, no cameras, steps/s at least
CAMERA_TARGET = RATE_HZ  # fast mode, two inline cameras, steps/s at least (real time for one robot)
JITTER_TARGET_MS = 5.0  # real-time lateness p99 at most
EPISODE = 100  # steps between (untimed) resets
TASK = "peg_insertion"


@dataclass(frozen=True)
class Setup:
    label: str
    cameras: SimCameraConfig
    visual: str = "lowpoly"


SETUPS = (
    Setup("no cameras", SimCameraConfig(names=())),
    Setup("2 cams inline, low-poly", SimCameraConfig(mode="inline")),
    Setup("2 cams inline, full meshes", SimCameraConfig(mode="inline"), visual="full"),
    Setup("2 cams render thread", SimCameraConfig(mode="thread")),
)


def action(k: int) -> np.ndarray:
    """A smooth figure-eight in x/y with a slow z wave, gripper closed on the peg."""
    t = k / 8.0
    return np.array([0.6 * math.sin(t), 0.6 * math.sin(2 * t), 0.3 * math.sin(t / 3), 0, 0, 0, -1], np.float32)


def make(setup: Setup, realtime: bool = False) -> SimFrankaRobot:
    cfg = SimRobotConfig(task=TASK, cameras=setup.cameras, visual=setup.visual, realtime=realtime)
    robot = SimFrankaRobot(cfg)
    robot.connect()
    robot.reset(0)
    return robot


@dataclass
class Trial:
    wall: list[float]  # steps per wall-clock second
    cpu: list[float]  # steps per second of this process's CPU time (all threads): the cost without contention
    frames: list[float]  # frames rendered per step


def measure(robot: SimFrankaRobot, steps: int, start: int) -> tuple[float, float, float]:
    """Steps per wall second and per CPU second over `steps` steps (resets every EPISODE steps, untimed),
    and frames rendered per step (a reset renders too)."""
    wall = cpu = 0.0
    cams = robot.cameras
    rendered = cams.rendered if cams is not None else 0
    for k in range(start, start + steps):
        if k % EPISODE == 0:
            robot.reset(k // EPISODE)
        t0, c0 = time.perf_counter(), time.process_time()
        robot.step(action(k))
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
    if cams is not None and cams.config.mode == "thread":
        cams.wait_for(cams.last_seq, 10.0)  # let the render thread finish this round's last frame (untimed)
    per_step = ((cams.rendered - rendered) / steps) if cams is not None and cams.names else 0.0
    return steps / wall, steps / max(cpu, 1e-9), per_step


def fast_mode(rounds: int, steps: int) -> dict[str, Trial]:
    robots = {s.label: make(s) for s in SETUPS}
    results = {s.label: Trial([], [], []) for s in SETUPS}
    try:
        for r in range(rounds):
            for s in SETUPS:
                wall, cpu, frames = measure(robots[s.label], steps, r * steps)
                results[s.label].wall.append(wall)
                results[s.label].cpu.append(cpu)
                results[s.label].frames.append(frames)
    finally:
        for robot in robots.values():
            robot.close()
    return results


def realtime_mode(steps: int) -> tuple[float, float, float, int, int]:
    robot = make(Setup("rt", SimCameraConfig(mode="thread")), realtime=True)
    try:
        robot.reset(0)
        robot.step(action(0))  # the first period includes renderer warm-up; leave it out
        robot.clear_pacing_stats()
        for k in range(1, steps + 1):
            robot.step(action(k))
        stats = robot.pacing_stats()
    finally:
        robot.close()
    return stats.p50_ms, stats.p99_ms, stats.max_ms, stats.overruns, stats.periods


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps (~40 s)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds per fast-mode setup")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per round")
    parser.add_argument("--rt-steps", type=int, default=100, help="real-time steps (10 Hz) for the jitter")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    steps = args.steps or (100 if args.quick else 200)
    started = time.monotonic()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"bench/sim.py: Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, MUJOCO_GL={os.environ['MUJOCO_GL']}; "
        f"task {TASK}, 1 step = 1 control period at {RATE_HZ:.0f} Hz = 50 physics steps at 500 Hz; "
        f"load average at start {load:.2f} (other processes share these CPUs)"
    )
    print(f"\n1. Fast mode: median over {rounds} interleaved rounds of {steps} steps (min..max)")
    print(
        f"{'setup':<28} {'steps/s':>8} {'range':>10} {'x real time':>12} {'vs no cams':>11} "
        f"{'steps/CPU-s':>12} {'frames/step':>12}"
    )
    results = fast_mode(rounds, steps)
    base = statistics.median(results[SETUPS[0].label].wall)
    medians = {}
    for s in SETUPS:
        trial = results[s.label]
        med = statistics.median(trial.wall)
        medians[s.label] = med
        spread = f"{min(trial.wall):.0f}..{max(trial.wall):.0f}"
        print(
            f"{s.label:<28} {med:>8.0f} {spread:>10} {med / RATE_HZ:>11.1f}x {med / base:>11.2f} "
            f"{statistics.median(trial.cpu):>12.0f} {statistics.median(trial.frames):>12.2f}"
        )
    no_cams, inline = medians[SETUPS[0].label], medians[SETUPS[1].label]
    print(f"   target: no cameras >= {STEPS_TARGET:.0f} steps/s: {verdict(no_cams >= STEPS_TARGET)}")
    print(f"   target: 2 inline cameras >= real time ({CAMERA_TARGET:.0f} steps/s): {verdict(inline >= CAMERA_TARGET)}")
    print(f"\n2. Real time at {RATE_HZ:.0f} Hz, 2 cameras on the render thread, {args.rt_steps} steps")
    p50, p99, worst, overruns, periods = realtime_mode(args.rt_steps)
    print(
        f"   lateness after deadline: p50 {p50:.3f} ms, p99 {p99:.3f} ms, max {worst:.3f} ms; "
        f"{overruns} overruns in {periods} periods"
    )
    print(f"   target: p99 <= {JITTER_TARGET_MS:.0f} ms: {verdict(p99 <= JITTER_TARGET_MS)}")
    ok = no_cams >= STEPS_TARGET and inline >= CAMERA_TARGET and p99 <= JITTER_TARGET_MS
    print(f"\n(took {time.monotonic() - started:.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
