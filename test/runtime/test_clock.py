"""`NodeClock`: a node of a deployment whose simulated robot publishes its simulation time stamps on that time
(0 before the first clock message, never the wall clock); without one, the wall clock. `user bringup` and the
launch file hand every node of such a deployment the clock topic."""

from __future__ import annotations

import time
from collections.abc import Callable

from test.conftest import REPO, wait_until
from user.bus.base import BEST_EFFORT
from user.bus.zenoh_bus import ZenohBus
from user.deploy.commands import launches
from user.deploy.deployment import load
from user.interfaces.stamps import to_time
from user.runtime.clock import ENV_SIM_CLOCK, NodeClock, sim_clock_topic
from user.runtime.node import Node


def test_the_clock_topic_is_a_robot_s_not_a_pedal_s() -> None:
    assert (
        sim_clock_topic([("learner", {}), ("robot", {"clock_topic": ""}), ("robot", {"clock_topic": "/clock"})])
        == "/clock"
    )
    assert sim_clock_topic([("pedal", {"clock_topic": "/clock"}), ("robot", {})]) == ""


def test_a_node_on_a_sim_clock_stamps_its_time(make_bus: Callable[..., ZenohBus], topic: str) -> None:
    node = Node(make_bus("stamped"))
    clock = NodeClock(node, {ENV_SIM_CLOCK: topic})
    assert clock.topic == topic and clock.now_ns() == 0  # nothing heard yet: 0, as rclpy on sim time
    source = Node(make_bus("sim"))
    pub = source.create_publisher(topic, "rosgraph_msgs/msg/Clock", BEST_EFFORT)
    msg = source.codec.msg_class("rosgraph_msgs/msg/Clock")

    def tick() -> bool:
        pub.publish(msg(clock=to_time(160_500_000_000, source.codec)))
        return clock.now_ns() == 160_500_000_000

    assert wait_until(tick, 10.0, 0.05)
    wall = NodeClock(node, {})
    assert wall.topic == "" and abs(wall.now_ns() - time.time_ns()) < 10**9


def test_every_node_of_a_sim_deployment_gets_the_clock_topic() -> None:
    default = launches(load(REPO / "config" / "default.yaml"))
    assert default and all(n.env.get(ENV_SIM_CLOCK) == "/clock" for n in default)
    assert all(ENV_SIM_CLOCK not in n.env for n in launches(load(REPO / "config" / "talker_listener.yaml")))
