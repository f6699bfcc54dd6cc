"""Robots join and leave running learner, rollout and monitor nodes (`admit`, `leave_after_s`), in one process over
real Zenoh: an arm whose id matches joins (its episodes are stored and acknowledged, the rollout acts for it), an
arm whose state does not fit the policy is refused with one line and none of it is stored, and an arm that goes away
is dropped after the deadline with one line while the monitor marks it gone."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test.conftest import wait_until
from test.nodes.test_learning_nodes import LEARNING, _robot_params
from user.buffer.rows import TransitionQuery
from user.bus.zenoh_bus import ZenohBus
from user.runtime.node import started

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(180)
FLEET = {"admit": ["arm_*"], "leave_after_s": 0.5}


def messages(caplog: pytest.LogCaptureFixture, fragment: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if fragment in r.getMessage()]


def test_an_arm_joins_a_misfit_is_refused_and_a_gone_arm_leaves(
    nodes: Callable[..., Any], make_bus: Callable[..., ZenohBus], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from user.nodes.learner import LearnerNode
    from user.nodes.monitor import MonitorNode
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    caplog.set_level(logging.INFO)
    learner_params = {**FLEET, "run_dir": str(tmp_path / "run"), "learning": LEARNING, "stats_period_s": 0.2,
                      "pacing": {"min_transitions": 64, "publish_every": 10}, "torch_threads": 1}  # fmt: skip
    learner = nodes(LearnerNode, "learner", learner_params)
    rollout = nodes(RolloutNode, "rollout", {**FLEET, "learning": LEARNING})
    monitor = nodes(MonitorNode, "monitor", {**FLEET, "period_s": 0.2})
    arm = started(RobotNode(make_bus("arm_x", _robot_params("arm_x", credit_topic=""))))
    misfit = started(RobotNode(make_bus("arm_bad", _robot_params("arm_bad", embodiment_in_state=True))))
    try:
        assert wait_until(lambda: learner.session.counters.episodes >= 2, 120.0), learner.session.counters
        assert wait_until(lambda: messages(caplog, "refused robot arm_bad: state_dim") != [], 30.0)
        assert rollout.answered > 0 and learner.fleet is not None and learner.fleet.roster.joined == ["arm_x"]
        assert any(line.split(" ", 1)[1].startswith("arm_x: ") for line in monitor.lines)
    finally:
        misfit.destroy()
        misfit.bus.close()
        arm.destroy()
        arm.bus.close()  # its announcement goes with its session
    assert wait_until(lambda: messages(caplog, "robot arm_x left") != [], 30.0)
    assert wait_until(lambda: any("arm_x: " in line and "(gone since" in line for line in monitor.lines), 10.0)
    assert learner.fleet.roster.joined == [] and rollout.fleet is not None and rollout.fleet.roster.joined == []
    buffer = learner.session.buffer
    assert {t.robot_id for t in buffer.get(buffer.query(TransitionQuery()))} == {"arm_x"}  # nothing of the misfit
    learner_lines = [r.getMessage() for r in caplog.records if r.name == learner.log.name]
    assert sum("refused robot arm_bad" in m for m in learner_lines) == 1
    assert sum("robot arm_x left" in m for m in learner_lines) == 1
    assert sum("robot arm_x joined" in m for m in learner_lines) == 1
    assert not [m for m in learner_lines if "robot arm_bad joined" in m]  # refused is all it says of the misfit
    failed = [r.getMessage() for r in caplog.records if "callback" in r.getMessage() and "raised" in r.getMessage()]
    assert not failed, failed
