"""A rollout beside the learner takes its weights over the learner's weight link (torch.distributed, gloo on CPU), not
the Bus (issue 34, item 6): the learner node serves them with `weight_link.port`, the rollout node joins with
`weights_from: link`, acts with the learner's version and stamps its actions with it, as with the Bus. A link that
cannot be reached at start is an error naming its address; `weight_link` set for a rollout on the Bus is refused."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from test.conftest import free_port, wait_until
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError, from_mapping
from user.interfaces.domain import Action, Observation, action_from_msg, observation_to_msg
from user.nodes.learner import LearnerParams
from user.nodes.rollout import RolloutParams
from user.runtime.node import Node

pytestmark = pytest.mark.timeout(90)

ROBOT = "arm_link"
WAIT_S = 30.0
LEARNING = {"mlp": {"state_dim": 7, "action_dim": 4, "hidden": [8]}, "rlpd": {"num_critics": 2, "critic_hidden": [8]}}


def test_a_rollout_beside_the_learner_acts_with_the_versions_of_its_weight_link(
    make_bus: Callable[..., ZenohBus], tmp_path: Path
) -> None:
    from user.nodes.learner import LearnerNode
    from user.nodes.rollout import RolloutNode

    port = free_port()
    learner_params = {"robots": [ROBOT], "run_dir": str(tmp_path / "run"), "learning": LEARNING, "torch_threads": 1,
                      "pacing": {"min_transitions": 10_000}, "weights_topic": "/nobody/weights",
                      "weight_link": {"port": port, "timeout_s": 5.0, "heartbeat_s": 0.2}}  # fmt: skip
    learner = LearnerNode(make_bus("learner", learner_params))
    rollout = None
    try:
        rollout_params = {"robots": [ROBOT], "learning": LEARNING, "report_period_s": 0.0, "weights_from": "link",
                          "weight_link": {"address": f"127.0.0.1:{port}"}}  # fmt: skip
        rollout = RolloutNode(make_bus("rollout", rollout_params))
        learner.publisher.publish_now()  # a version after the one published at start
        version = learner.publisher.version
        assert wait_until(lambda: rollout.weights.version == version, WAIT_S)
        assert torch.equal(rollout.latest.get_weights().data, learner.session.policy.get_weights().data)
        link = learner.publisher.link
        assert link is not None
        assert wait_until(lambda: version in link.acked().values(), WAIT_S)  # its receipt
        actions: list[Action] = []
        lock = threading.Lock()
        robot = Node(make_bus("robot"))

        def on_action(msg: Any) -> None:
            with lock:
                actions.append(action_from_msg(msg))

        robot.create_subscription(f"/{ROBOT}/action", "user/msg/Action", on_action)
        observations = robot.create_publisher(f"/{ROBOT}/observation", "user/msg/Observation")
        assert wait_until(lambda: robot.bus.count_subscribers(f"/{ROBOT}/observation") >= 1, WAIT_S)
        obs = Observation(ROBOT, "peg_insertion", 0, 0, np.linspace(-0.5, 0.5, 7, dtype=np.float32), 1_000)
        observations.publish(observation_to_msg(obs, robot.codec))
        assert wait_until(lambda: len(actions) >= 1, WAIT_S)
        assert actions[0].policy_version == version  # acknowledged as with the Bus: the action names its version
    finally:
        if rollout is not None:
            rollout.destroy()
        learner.destroy()


def test_a_rollout_whose_link_cannot_be_reached_fails_naming_the_address(make_bus: Callable[..., ZenohBus]) -> None:
    from user.nodes.rollout import RolloutNode

    address = f"127.0.0.1:{free_port()}"
    params = {"robots": [ROBOT], "learning": LEARNING, "report_period_s": 0.0, "weights_from": "link",
              "weight_link": {"address": address, "timeout_s": 1.0}}  # fmt: skip
    with pytest.raises(ConfigError, match=rf"cannot join the learner's weight link at {address}"):
        RolloutNode(make_bus("rollout_alone", params))


def test_the_link_settings_are_typed_and_belong_to_their_mode() -> None:
    p = from_mapping(LearnerParams, {"robots": ["a"], "weight_link": {"port": 29600}}, where="learner")
    assert (p.weight_link.port, p.weight_link.enabled, p.weight_link.backend) == (29600, True, "auto")
    assert not from_mapping(LearnerParams, {"robots": ["a"]}, where="learner").weight_link.enabled  # off by default
    r = from_mapping(RolloutParams, {"robots": ["a"], "weights_from": "link"}, where="rollout")
    assert r.weight_link.address == "127.0.0.1:29600"
    with pytest.raises(ConfigError, match="weight_link"):  # set, but the weights come from the Bus
        from_mapping(RolloutParams, {"robots": ["a"], "weight_link": {"address": "127.0.0.1:1"}}, where="rollout")
    with pytest.raises(ConfigError, match="weights_from"):
        from_mapping(RolloutParams, {"robots": ["a"], "weights_from": "ipc"}, where="rollout")
