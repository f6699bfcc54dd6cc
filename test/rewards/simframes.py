"""Labelled sim frames for the reward-classifier tests: peg insertion driven by its scripted expert.

Positive: the front camera after the expert succeeded (plus a few settling steps); negative: the first
half of each episode (the peg well above the hole). Each episode is one seed, so train and held-out
frames come from different episodes.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np
import numpy.typing as npt

from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig

SIZE = 64
MAX_STEPS = 60
AFTER_SUCCESS = 3


def episode_frames(seeds: range, camera: str = "front") -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """(N, SIZE, SIZE, 3) frames and success labels over the given episode seeds."""
    cams = SimCameraConfig(names=(camera,), width=SIZE, height=SIZE, mode="inline")
    robot = SimFrankaRobot(SimRobotConfig(task="peg_insertion", cameras=cams))
    frames: list[npt.NDArray[np.uint8]] = []
    labels: list[bool] = []
    robot.connect()
    try:
        task = robot.task
        assert task is not None
        for seed in seeds:
            state = robot.reset(seed)
            episode: list[npt.NDArray[np.uint8]] = [robot.frames()[camera].image.copy()]
            success_at, after = -1, 0
            for _ in range(MAX_STEPS):
                state = robot.step(task.scripted_expert(state, robot.task_state())).state
                episode.append(robot.frames()[camera].image.copy())
                if success_at < 0 and task.success(state, robot.task_state()):
                    success_at = len(episode) - 1
                if success_at >= 0:
                    after += 1
                    if after > AFTER_SUCCESS:
                        break
            if success_at < 0:
                continue
            negatives = episode[: max(1, success_at // 2)]
            positives = episode[success_at:]
            frames += negatives + positives
            labels += [False] * len(negatives) + [True] * len(positives)
    finally:
        robot.close()
    return np.stack(frames), np.asarray(labels, dtype=np.bool_)
