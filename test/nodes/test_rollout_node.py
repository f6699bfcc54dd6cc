"""The rollout node's doors over real Zenoh: it acts only with weights of its learner that are whole and finite,
answers only valid observations of its robot, and never sends an action that is not a valid command (the robot
holds instead). Issue 13, finding 3 and "a robot never moves on bad data"."""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
import pytest
import torch

from test.conftest import wait_until
from user.acting.config import ActingConfig
from user.bus.ros_params import ros_params
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import Action, Observation, action_from_msg, observation_to_msg
from user.interfaces.stamps import header, now_ns
from user.learner.config import LearningConfig
from user.nodes.rollout import RolloutParams
from user.policies.base import Policy
from user.policies.mlp import MLPPolicyConfig
from user.runtime.node import Node
from user.sync.chunking import MSG_TYPE, chunk_to_msg, split_weights
from user.sync.publisher import WeightPublisher

pytestmark = pytest.mark.timeout(60)

ROBOT = "arm_rollout"
WAIT_S = 10.0
MLP = {"state_dim": 7, "action_dim": 4, "hidden": [8]}


def _learning() -> LearningConfig:
    return LearningConfig(mlp=MLPPolicyConfig(state_dim=7, action_dim=4, hidden=(8,)), exclude_state_prefixes=())


@dataclass
class Rig:
    rollout: Any
    robot: Node
    topic: str  # where weights go
    actions: list[Action] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, step: int, state: np.ndarray | None = None, robot_id: str = ROBOT) -> None:
        values = np.linspace(-0.5, 0.5, 7, dtype=np.float32) if state is None else state
        obs = Observation(robot_id, "peg_insertion", 0, step, values, 1_000 + step)
        self.publisher.publish(observation_to_msg(obs, self.robot.codec))

    def steps(self) -> list[int]:
        with self.lock:
            return [a.step for a in self.actions]

    def __post_init__(self) -> None:
        self.publisher = self.robot.create_publisher(f"/{ROBOT}/observation", "user/msg/Observation")
        self.robot.create_subscription(f"/{ROBOT}/action", "user/msg/Action", self._on_action)
        assert wait_until(lambda: self.robot.bus.count_subscribers(f"/{ROBOT}/observation") >= 1, WAIT_S)

    def _on_action(self, msg: Any) -> None:
        with self.lock:
            self.actions.append(action_from_msg(msg))

    def learner(self, make_bus: Callable[..., ZenohBus], name: str) -> tuple[WeightPublisher, Policy]:
        policy = _learning().build_policy()
        node = Node(make_bus(name))
        return WeightPublisher(node, policy, policy_id="policy", topic=self.topic, publisher=name), policy


@pytest.fixture
def rig(make_bus: Callable[..., ZenohBus], topic: str) -> Iterator[Rig]:
    from user.nodes.rollout import RolloutNode

    params = {"robots": [ROBOT], "learning": {"mlp": MLP, "exclude_state_prefixes": []}, "weights_topic": topic,
              "weights_publisher": "learner_a", "report_period_s": 0.0}  # fmt: skip
    rollout = RolloutNode(make_bus("rollout", params))
    yield Rig(rollout, Node(make_bus("robot")), topic)
    rollout.destroy()


def test_only_the_configured_learner_s_weights_are_applied(rig: Rig, make_bus: Callable[..., ZenohBus]) -> None:
    stranger, _ = rig.learner(make_bus, "learner_b")
    stranger.publish_now()
    assert wait_until(lambda: rig.rollout.weights.refusals.count("weights publisher") >= 1, WAIT_S)
    assert rig.rollout.weights.received_versions == 0
    rig.observe(0)
    assert wait_until(lambda: rig.rollout.skipped >= 1, WAIT_S)  # no weights of its learner: no action
    own, policy = rig.learner(make_bus, "learner_a")
    assert own.publish_now() == 1
    assert wait_until(lambda: rig.rollout.weights.version == 1, WAIT_S)
    assert torch.equal(rig.rollout.latest.get_weights().data, policy.get_weights().data)
    rig.observe(1)
    assert wait_until(lambda: rig.steps() == [1], WAIT_S)


def test_weights_that_are_not_finite_are_not_applied(rig: Rig, make_bus: Callable[..., ZenohBus]) -> None:
    own, policy = rig.learner(make_bus, "learner_a")
    assert own.publish_now() == 1
    assert wait_until(lambda: rig.rollout.weights.version == 1, WAIT_S)
    with torch.no_grad():
        next(policy.actor.parameters()).view(-1)[0] = float("nan")
    poisoned = replace(policy.get_weights(), version=2)
    forger = Node(make_bus("forger"))
    raw = forger.create_publisher(rig.topic, MSG_TYPE)
    assert wait_until(lambda: forger.bus.count_subscribers(rig.topic) >= 1, WAIT_S)
    for chunk in split_weights(poisoned, "policy", publisher="learner_a"):  # valid CRC and layout, NaN values
        raw.publish(chunk_to_msg(chunk, forger.codec, 0))
    assert wait_until(lambda: rig.rollout.weights.rejected == 1, WAIT_S)
    assert rig.rollout.weights.version == 1
    assert torch.isfinite(rig.rollout.latest.get_weights().data).all()


def test_an_observation_that_is_not_valid_is_not_answered(rig: Rig, make_bus: Callable[..., ZenohBus]) -> None:
    own, _ = rig.learner(make_bus, "learner_a")
    own.publish_now()
    assert wait_until(lambda: rig.rollout.weights.version == 1, WAIT_S)
    rig.observe(0, state=np.full(7, np.inf, np.float32))
    rig.observe(1, robot_id="another_arm")
    assert wait_until(lambda: rig.rollout.refusals.total == 2, WAIT_S)
    assert rig.rollout.refusals.counts == {
        "observation.state is not finite": 1,
        "observation.robot_id names another robot": 1,
    }
    rig.observe(2)
    assert wait_until(lambda: rig.steps() == [2], WAIT_S)


def test_an_action_that_is_not_finite_is_never_sent(
    rig: Rig, make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    own, _ = rig.learner(make_bus, "learner_a")
    own.publish_now()
    assert wait_until(lambda: rig.rollout.weights.version == 1, WAIT_S)

    def broken(self: Policy, obs: Any, *, deterministic: bool) -> torch.Tensor:
        return torch.full((len(obs), 4), float("nan"))

    monkeypatch.setattr(type(rig.rollout.latest), "act_tensor", broken)
    rig.observe(0)
    assert wait_until(lambda: rig.rollout.refusals.total == 1, WAIT_S)
    assert rig.rollout.refusals.counts == {"action.data is not finite": 1} and rig.rollout.answered == 0
    monkeypatch.undo()
    rig.observe(1)
    assert wait_until(lambda: rig.steps() == [1], WAIT_S)


def _answered(rig: Rig, count: int) -> bool:
    return len(rig.steps()) == count


def test_random_steps_act_uniformly_at_random_until_the_learner_has_that_many(
    make_bus: Callable[..., ZenohBus], topic: str
) -> None:
    """Issue 14, finding 5: standard SAC's warm-up. The same observation gets a different action each time while
    the learner (its stats' env_steps) has fewer than `random_steps` transitions, then the policy's (deterministic
    here: the same action for the same observation)."""
    from user.nodes.rollout import RolloutNode

    stats = f"{topic}_stats"
    params = {"robots": [ROBOT], "learning": {"mlp": MLP, "exclude_state_prefixes": []}, "weights_topic": topic,
              "report_period_s": 0.0, "deterministic": True, "random_steps": 100, "stats_topic": stats}  # fmt: skip
    rollout = RolloutNode(make_bus("rollout", params))
    try:
        rig = Rig(rollout, Node(make_bus("robot")), topic)
        own, _ = rig.learner(make_bus, "learner")
        own.publish_now()
        assert wait_until(lambda: rollout.weights.version == 1, WAIT_S)
        for step in range(4):
            rig.observe(step)
            assert wait_until(partial(_answered, rig, step + 1), WAIT_S)
        with rig.lock:
            warm = [a.data for a in rig.actions]
        assert all(np.all(np.abs(a) <= 1.0) for a in warm)
        assert len({a.tobytes() for a in warm}) == 4  # random: no two alike
        learner = rig.robot.create_publisher(stats, "user/msg/TrainingStats")
        codec = rig.robot.codec
        msg = codec.msg_class("user/msg/TrainingStats")(
            header=header(now_ns(), "", codec), learner_id="learner", updates=0, policy_version=1,
            buffer_transitions=100, env_steps=100, updates_per_second=0.0, names=[], values=np.zeros(0, np.float32),
        )  # fmt: skip
        assert wait_until(lambda: rig.robot.bus.count_subscribers(stats) >= 1, WAIT_S)
        learner.publish(msg)
        assert wait_until(lambda: not rollout.warming_up, WAIT_S)
        for step in range(4, 7):
            rig.observe(step)
            assert wait_until(partial(_answered, rig, step + 1), WAIT_S)
        with rig.lock:
            policy = [a.data for a in rig.actions[4:]]
        assert len({a.tobytes() for a in policy}) == 1  # the policy's mean for the same observation
    finally:
        rollout.destroy()


def test_each_acting_setting_is_declared_once_and_keeps_its_name() -> None:
    """The rollout's settings extend the acting session's (`ActingConfig`), under the names users always wrote."""
    assert issubclass(RolloutParams, ActingConfig)
    own = inspect.get_annotations(RolloutParams)
    assert not [f.name for f in dataclasses.fields(ActingConfig) if f.name in own]  # none declared again
    names = {p.name for p in ros_params(RolloutParams)}
    acting = {"apply", "deterministic", "wait_for_weights", "start_episode", "random_steps", "sync_timeout_s"}
    assert acting | {"learning.policy_id", "robots", "mode"} <= names
