"""The learning pipeline's nodes in one process over real Zenoh: robot (sim Franka, peg insertion, lockstep),
scripted-expert demos, learner (RLPD, persistent buffer) and rollout (learned policy), plus a monitor.

Checks the plumbing, not learning: demos reach the buffer, the rollout's policy version advances, every
stored online transition carries the version that acted and each episode keeps one version (weights switch at
episode boundaries), checkpoints resume counters, and sync mode trains between episodes with the robot
waiting.
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from test.conftest import wait_until
from user.buffer.rows import TransitionQuery
from user.bus.zenoh_bus import ZenohBus

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(120)

DEMOS = 2
LEARNING = {
    "mlp": {"state_dim": 17, "action_dim": 7, "hidden": [64, 64]},
    "rlpd": {"num_critics": 2, "critic_hidden": [64, 64], "batch_size": 64, "utd_ratio": 2},
}


def _robot_params(robot: str, **extra: Any) -> dict[str, Any]:
    return {"robot_id": robot, "task": "peg_insertion", "realtime": False, "privileged_state": True,
            "wait_for_consumer_s": 10.0, **extra}  # fmt: skip


def _learner_params(robot: str, run_dir: Path, **pacing: Any) -> dict[str, Any]:
    return {"robots": [robot], "run_dir": str(run_dir), "learning": LEARNING, "stats_period_s": 0.2,
            "pacing": {"min_transitions": 64, "publish_every": 10, **pacing}, "torch_threads": 1}  # fmt: skip


def test_async_pipeline_versions_demos_and_resume(
    nodes: Callable[..., Any], make_bus: Callable[..., ZenohBus], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from user.nodes.expert import ExpertNode
    from user.nodes.learner import LearnerNode
    from user.nodes.monitor import MonitorNode
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    robot = "arm_async"
    run = tmp_path / "run"
    learner = nodes(LearnerNode, "learner", _learner_params(robot, run))
    rollout_params = {"robots": [robot], "learning": LEARNING, "start_episode": DEMOS, "report_period_s": 0.5}
    rollout = nodes(RolloutNode, "rollout", rollout_params)
    monitor = nodes(MonitorNode, "monitor", {"robots": [robot], "period_s": 0.2})
    nodes(ExpertNode, "expert", {"robot_id": robot, "task": "peg_insertion", "until_episode": DEMOS})
    robot_node = nodes(RobotNode, "robot", _robot_params(robot))
    caplog.set_level(logging.INFO)
    assert wait_until(lambda: rollout.weights.version >= 4 and learner.session.counters.episodes >= DEMOS + 3, 90.0)
    assert robot_node.failed is None and learner.session.trainer.failed is None and learner.rejected == 0
    assert learner.refusals.total == 0 and rollout.refusals.total == 0  # the doors let every real message in
    assert rollout.weights.rejected == 0 and learner.session.halted is None
    assert any(" learner: " in line and "policy version" in line for line in monitor.lines)
    assert np.isfinite(rollout.latency_percentile(99))
    reports = [r.getMessage() for r in caplog.records if "observation -> action p50" in r.getMessage()]
    assert reports and re.search(r"answered [1-9]\d* observations .* p99 \d+\.\d ms; mean batch 1\.00", reports[-1])

    buf = learner.session.buffer
    demos = buf.get(buf.query(TransitionQuery(is_demo=True)))
    assert demos and {t.episode_id for t in demos} == set(range(DEMOS)) and all(t.action.source == 2 for t in demos)
    online = buf.get(buf.query(TransitionQuery(is_demo=False)))
    assert online and all(t.episode_id >= DEMOS for t in online)
    versions: dict[int, set[int]] = collections.defaultdict(set)
    for t in online:
        versions[t.episode_id].add(t.action.policy_version)
    assert all(len(v) == 1 and min(v) >= 1 for v in versions.values()), versions  # one version per episode
    assert max(max(v) for v in versions.values()) > 1  # and it advanced while the run went on

    calls = learner.session.trainer.counters.update_calls
    learner.destroy()  # the fixture's later destroy is harmless: it saves and closes again
    assert (run / "checkpoints" / "latest.pt").is_file() and (run / "progress.csv").is_file()
    again = LearnerNode(make_bus("learner2", _learner_params(robot, run)))
    try:
        assert again.session.resumed and again.session.trainer.counters.update_calls >= calls
        assert again.publisher.version > learner.publisher.version - 1
        assert len(again.session.buffer) >= len(online) + len(demos)
    finally:
        again.destroy()


def test_sync_mode_trains_between_episodes_while_the_robot_waits(nodes: Callable[..., Any], tmp_path: Path) -> None:
    from user.nodes.expert import ExpertNode
    from user.nodes.learner import LearnerNode
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    robot = "arm_sync"
    updates_per_step = 0.5
    learner = nodes(
        LearnerNode, "learner", _learner_params(robot, tmp_path / "run", mode="sync", updates_per_step=updates_per_step)
    )
    rollout = nodes(
        RolloutNode, "rollout", {"robots": [robot], "learning": LEARNING, "start_episode": DEMOS, "mode": "sync"}
    )
    nodes(ExpertNode, "expert", {"robot_id": robot, "task": "peg_insertion", "until_episode": DEMOS})
    nodes(RobotNode, "robot", _robot_params(robot, auto_reset=False))
    assert wait_until(lambda: learner.session.counters.episodes >= DEMOS + 4, 90.0)
    assert learner.session.trainer.failed is None and learner.rejected == 0 and rollout.answered > 0
    assert learner.refusals.total == 0 and rollout.refusals.total == 0

    buf = learner.session.buffer
    online = buf.get(buf.query(TransitionQuery(is_demo=False)))
    by_episode: dict[int, list[Any]] = collections.defaultdict(list)
    for t in online:
        by_episode[t.episode_id].append(t)
    episodes = sorted(by_episode)
    versions = [by_episode[e][0].action.policy_version for e in episodes]
    assert all(len({t.action.policy_version for t in by_episode[e]}) == 1 for e in episodes)
    assert all(b > a for a, b in itertools.pairwise(versions)), versions  # trained in between
    # the training phases are sized by the update-to-data ratio: gradient steps = ratio x transitions, counted
    # from the episode that filled the buffer to min_transitions (64) to the newest one trained on (<= 100 steps)
    steps = learner.session.trainer.counters.gradient_steps
    stored = len(buf)
    assert updates_per_step * (stored - 64 - 100) - 1 <= steps <= updates_per_step * stored + 1, (steps, stored)


def test_interventions_are_flagged_stored_and_imitated_by_hg_dagger(nodes: Callable[..., Any], tmp_path: Path) -> None:
    from user.nodes.expert import ExpertNode
    from user.nodes.learner import LearnerNode
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode
    from user.policies.base import PolicyInput

    robot = "arm_hg"
    learning = {"mlp": {"state_dim": 17, "action_dim": 7, "hidden": [64, 64]}, "algorithm": "hg_dagger",
                "hg_dagger": {"bc": {"lr": 1e-3, "batch_size": 64}}}  # fmt: skip
    params = _learner_params(robot, tmp_path / "run", publish_every=20, updates_per_step=2.0)
    params["learning"] = learning
    learner = nodes(LearnerNode, "learner", params)
    rollout = nodes(RolloutNode, "rollout", {"robots": [robot], "learning": learning, "deterministic": True})
    nodes(ExpertNode, "human", {"robot_id": robot, "task": "peg_insertion", "role": "human",
                                "steps": list(range(20))})  # fmt: skip
    nodes(RobotNode, "robot", _robot_params(robot))
    assert wait_until(
        lambda: learner.session.trainer.counters.update_calls >= 300 and learner.session.counters.episodes >= 3, 90.0
    )
    assert learner.session.trainer.failed is None
    assert learner.refusals.total == 0 and rollout.refusals.total == 0  # human actions pass the door too

    buf = learner.session.buffer
    flagged = buf.get(buf.query(TransitionQuery(intervened=True)))
    assert flagged and all(t.action.source == 1 and not t.is_demo for t in flagged)  # SOURCE_HUMAN
    # the human answers steps 0-19; whether a step is the human's depends on which action reaches the robot
    # first (lockstep) and an intervention overrides for intervention_deadline_s, so count, don't enumerate
    episodes = {t.episode_id for t in flagged}
    early = {(t.episode_id, t.observation.step) for t in flagged if t.observation.step < 20}
    assert len(early) >= 0.5 * 20 * len(episodes), sorted(early)
    plain = buf.get(buf.query(TransitionQuery(intervened=False)))
    assert plain and all(t.action.source == 0 for t in plain)  # the rest was the policy's

    # HG-DAgger trained on the human's actions: the policy now imitates them far better than at version 1
    selector = learner.session.trainer.selector
    states = [selector.select(t.observation.state, t.observation.state_names) for t in flagged]
    human = np.stack([t.action.data for t in flagged])
    initial = learner.params.learning.build_policy()  # same seed: the weights published as version 1

    def error(policy: Any) -> float:
        acts = np.stack([policy.act(PolicyInput(s), deterministic=True) for s in states])
        return float(np.mean((acts - human) ** 2))

    with learner.session.trainer.locked():
        trained = error(learner.session.policy)
    assert trained < 0.5 * error(initial), (trained, error(initial))
