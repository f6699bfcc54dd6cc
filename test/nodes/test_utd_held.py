"""Issue 14, finding 1: in async mode the update-to-data ratio holds in both directions. A gym robot that is not
real time runs much faster than the learner can train at the set ratio; the learner's data credit makes it wait,
so the transitions received stay within the tolerance of what the learner trained for, plus the episode running
(the buffer stores whole episodes: the learner cannot train on a running one), in-process over real Zenoh."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from test.conftest import wait_until
from user.learner.session_report import ratio_reached

pytest.importorskip("gymnasium")
pytestmark = pytest.mark.timeout(180)

ROBOT = "pendulum_utd"
RATIO = 2.0  # gradient steps per transition
WARMUP = 200  # transitions before the first update
TOLERANCE = 32  # transitions the robot may run ahead
SLACK = 64  # steps in flight when a credit message goes out (the robot counts from its arrival)
EPISODE = 200  # Pendulum-v1's episode: received, not stored until it ends
LEARNING = {"algorithm": "sac", "mlp": {"state_dim": 3, "action_dim": 1, "hidden": [256, 256]},
            "sac": {"batch_size": 256, "critic_hidden": [256, 256]}}  # fmt: skip


def _beyond(count: Callable[[], int], than: int) -> bool:
    return count() > than


def test_a_robot_that_is_not_real_time_waits_for_the_learner(nodes: Callable[..., Any], tmp_path: Path) -> None:
    from user.nodes.learner import LearnerNode
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    learner = nodes(LearnerNode, "learner", {
        "robots": [ROBOT], "run_dir": str(tmp_path / "run"), "learning": LEARNING, "torch_threads": 1,
        "pacing": {"updates_per_step": RATIO, "min_transitions": WARMUP, "publish_every": 20},
        "credit_tolerance": TOLERANCE, "stats_period_s": 0.2,
    })  # fmt: skip
    nodes(RolloutNode, "rollout", {"robots": [ROBOT], "learning": LEARNING, "report_period_s": 0.0})
    robot = nodes(RobotNode, "robot", {"robot_id": ROBOT, "driver": "gym", "gym_env": "Pendulum-v1",
                                       "realtime": False, "wait_for_consumer_s": 10.0})  # fmt: skip
    session = learner.session

    def env_steps() -> int:
        return int(session.counters.env_steps)

    assert wait_until(lambda: env_steps() >= WARMUP + 500, 150.0), (env_steps(), robot.failed)
    assert robot.failed is None and session.trainer.failed is None
    assert robot.credit is not None and robot.credit.held > 0  # it did wait
    for _ in range(3):  # received <= warm-up + what was trained for + tolerance + the running episode (+ in flight)
        received = env_steps()
        trained_for = session.trainer.snapshot().gradient_steps / RATIO
        assert received <= WARMUP + trained_for + TOLERANCE + EPISODE + SLACK, (received, trained_for)
        assert wait_until(partial(_beyond, env_steps, received), 30.0)  # ... and the robot goes on
    reached = ratio_reached(session.trainer.snapshot().gradient_steps, env_steps())
    assert reached >= 0.5 * RATIO  # the warm-up's transitions were never trained for: below the set ratio, not far
