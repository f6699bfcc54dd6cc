"""A rollout that can serve one robot at a time (`admit`, `max_robots: 1`, issue 36 item 3), in one process over real
Zenoh: of two lock-step gym robots that join, the first is served and steps; the second is told why it waits (its
`assignment` says so, latched) and holds, taking no step; when the first stops and leaves, the second is served
and steps."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.zenoh_bus import ZenohBus
from user.runtime.node import started

pytest.importorskip("gymnasium")
pytestmark = pytest.mark.timeout(120)
LEARNING = {"policy_id": "cap", "mlp": {"state_dim": 3, "action_dim": 1, "hidden": [8]}, "exclude_state_prefixes": []}


def _gym(robot: str) -> dict[str, Any]:
    return {"robot_id": robot, "driver": "gym", "gym_env": "Pendulum-v1", "realtime": False, "credit_topic": "",
            "outbox_episodes": 0, "action_timeout_s": 0.2}  # fmt: skip


def test_the_second_robot_waits_told_why_until_the_first_leaves(
    nodes: Callable[..., Any], make_bus: Callable[..., ZenohBus], caplog: pytest.LogCaptureFixture
) -> None:
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    caplog.set_level(logging.INFO)
    params = {"admit": ["cap_*"], "leave_after_s": 0.5, "max_robots": 1, "learning": LEARNING,
              "wait_for_weights": False}  # fmt: skip
    rollout = nodes(RolloutNode, "rollout", params)
    first = started(RobotNode(make_bus("cap_a", _gym("cap_a"))))
    assert wait_until(lambda: rollout.fleet.roster.joined == ["cap_a"], 30.0)
    second = started(RobotNode(make_bus("cap_b", _gym("cap_b"))))
    try:
        assert wait_until(lambda: second.assignment.text.startswith("waiting: "), 30.0), second.assignment.text
        assert "this rollout serves its 1 robot(s) already (cap_a)" in second.assignment.text
        assert wait_until(lambda: (first.loop.observation.step or 0) > 5, 30.0)  # type: ignore[union-attr]
        assert second.loop.episode_id == 0 and second.loop.observation.step == 0  # type: ignore[union-attr]
        assert rollout.fleet.roster.joined == ["cap_a"] and list(rollout.fleet.roster.waiting) == ["cap_b"]
    finally:
        first.destroy()
        first.bus.close()  # its announcement goes with its session
    assert wait_until(lambda: second.assignment.text == "served by rollout", 30.0), second.assignment.text
    assert wait_until(lambda: (second.loop.observation.step or 0) > 5, 30.0)  # type: ignore[union-attr]
    assert rollout.fleet.roster.joined == ["cap_b"]
    second.destroy()
    lines = [r.getMessage() for r in caplog.records if r.name == rollout.log.name and "cap_b waits" in r.getMessage()]
    assert len(lines) == 1, lines


def test_two_rollouts_sharing_a_fleet_serve_each_robot_once_and_take_over_one_whose_rollout_is_gone(
    nodes: Callable[..., Any], make_bus: Callable[..., ZenohBus]
) -> None:
    """Several rollouts (issue 36, item 3): each robot served by exactly one; when it is gone, the other takes over."""
    from user.nodes.robot import RobotNode
    from user.nodes.rollout import RolloutNode

    params = {"admit": ["cap_*"], "leave_after_s": 0.5, "learning": LEARNING, "wait_for_weights": False}
    first = nodes(RolloutNode, "rollout_a", params)
    second = nodes(RolloutNode, "rollout_b", params)
    arm = started(RobotNode(make_bus("cap_s", _gym("cap_s"))))
    try:

        def stepped() -> bool:  # no observation before its first step
            observation = arm.loop.observation
            return observation is not None and (observation.step or 0) > 10

        assert wait_until(stepped, 30.0)
        serving = [r for r in (first, second) if r.fleet.roster.joined == ["cap_s"]]
        assert len(serving) == 1, [r.fleet.roster.joined for r in (first, second)]
        (holder,) = serving
        other = second if holder is first else first
        assert arm.assignment.text == f"served by {holder.name}"
        assert other.answered == 0 and holder.answered > 10  # the other never acted for it
        holder.destroy()
        holder.bus.close()  # its claim goes with its session
        before = other.answered
        assert wait_until(lambda: other.answered > before + 10, 30.0), other.fleet.roster.joined
        assert wait_until(lambda: arm.assignment.text == f"served by {other.name}", 10.0), arm.assignment.text
    finally:
        arm.destroy()
