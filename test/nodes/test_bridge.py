"""The bridge of a ROS 2 site (issue 15): real rclpy/DDS on one side, Zenoh on the other; allowed topics cross
in their direction with their bytes unchanged on zenoh-bridge-ros2dds's keys, others do not; hardware announced
on DDS appears in a registry on the Zenoh side and goes when its announcer does."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zenoh

from test.conftest import user_cmd, wait_until
from test.helpers.collect import collect
from user.bus.base import LATCHED, Bus
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings, session_config
from user.config.strict import ConfigError, from_mapping
from user.hardware.announce import Announcer
from user.hardware.descriptor import ResourceDescriptor, ResourceKind
from user.hardware.registry import Registry
from user.nodes.bridge import BridgeNode, BridgeParams
from user.runtime.node import Node

pytestmark = pytest.mark.ros

STRING = "std_msgs/msg/String"
ACK = "user/msg/EpisodeAck"  # relayed as raw bytes: DDS matches on the type name, nobody decodes here


@pytest.fixture
def bridge(make_ros_bus: Callable[..., Bus], router_endpoint: str) -> Iterator[BridgeNode]:
    params = {"robots": ["arm_b"], "to_zenoh": ["/arm_b/notes std_msgs/msg/String"], "zenoh_router": [router_endpoint],
              "domain": "bridged"}  # fmt: skip
    node = BridgeNode(make_ros_bus("bridge", params, BridgeParams))
    yield node
    node.destroy()


def _zenoh(name: str, endpoint: str) -> ZenohBus:
    return ZenohBus(name, ZenohSettings(router=[endpoint], domain="bridged"))


def test_allowed_topics_cross_in_their_direction_unchanged(
    bridge: BridgeNode, make_ros_bus: Callable[..., Bus], router_endpoint: str
) -> None:
    ros = make_ros_bus("ros_side")
    cloud = _zenoh("cloud_side", router_endpoint)
    raw = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    try:
        keyed: list[bytes] = []
        raw.declare_subscriber("bridged/arm_b/notes", lambda s: keyed.append(s.payload.to_bytes()))
        notes = collect(cloud, "/arm_b/notes", STRING)
        acks = collect(ros, "/arm_b/episode_acks", ACK)
        back = collect(ros, "/arm_b/notes", STRING)  # the bridge must not send it back to DDS
        stray = collect(cloud, "/arm_b/private", STRING)
        out = ros.create_publisher("/arm_b/notes", STRING)
        private = ros.create_publisher("/arm_b/private", STRING)
        inn = cloud.create_publisher("/arm_b/episode_acks", ACK)
        payload = b"\x00\x01\x00\x00\x06\x00\x00\x00hello\x00"
        sent: list[int] = []

        def crossed() -> bool:
            out.publish(payload)
            sent.append(1)
            private.publish(payload)
            inn.publish(payload)
            return bool(notes) and bool(acks) and bool(keyed)

        assert wait_until(crossed, 20.0, 0.2), (notes, acks, keyed, bridge.counts())
        assert set(notes) == {payload} and set(acks) == {payload} and set(keyed) == {payload}
        time.sleep(0.5)
        assert stray == []  # not allowed: stays on DDS
        assert len(back) <= len(sent)  # the DDS publisher's own copies at most: the bridge sent none back
        assert bridge.counts()["/arm_b/notes"] >= 1 and bridge.counts()["/arm_b/episode_acks"] >= 1
    finally:
        raw.close()  # type: ignore[no-untyped-call]
        cloud.close()


def test_hardware_on_the_ros_side_is_listed_on_the_zenoh_side(
    bridge: BridgeNode, make_ros_bus: Callable[..., Bus], router_endpoint: str
) -> None:
    announcer = Announcer(
        make_ros_bus("arm_b_announcer"), ResourceDescriptor("arm_b", "robot", model="fr3", site="lab_b")
    )
    cloud = Node(_zenoh("registry", router_endpoint))
    registry = Registry(cloud)
    try:
        assert wait_until(lambda: [s.resource_id for s in registry.resources()] == ["arm_b"], 20.0, 0.2)
        (status,) = registry.resources()
        assert status.descriptor.site == "lab_b" and status.descriptor.model == "fr3"
        announcer.close()
        assert wait_until(lambda: registry.resources() == [], 20.0, 0.2)
    finally:
        announcer.close()
        registry.close()
        cloud.bus.close()


def test_a_robot_announced_at_the_site_that_may_join_gets_its_topics_relayed(
    make_ros_bus: Callable[..., Bus], router_endpoint: str
) -> None:
    """Issue 36: joining a running learner through the bridge. Only a robot (not a camera) whose id matches the
    site's `admit` gets its topics relayed, from its announcement on."""
    params = {"admit": ["arm_*"], "zenoh_router": [router_endpoint], "domain": "bridged"}
    node = BridgeNode(make_ros_bus("bridge_admit", params, BridgeParams))
    ros = make_ros_bus("site_robots")
    cloud = _zenoh("cloud_admit", router_endpoint)
    announced: list[Announcer] = []
    try:
        ids = ("arm_j", "arm_cam", "x_j")
        acks = {r: collect(cloud, f"/{r}/episode_events", "user/msg/EpisodeEvent") for r in ids}
        out = {r: ros.create_publisher(f"/{r}/episode_events", "user/msg/EpisodeEvent") for r in acks}
        payload = b"\x00\x01\x00\x00event"
        time.sleep(1.0)
        for publisher in out.values():
            publisher.publish(payload)
        time.sleep(1.0)
        assert acks["arm_j"] == []  # not yet announced: nothing crosses
        kinds: tuple[tuple[str, ResourceKind], ...] = (("arm_j", "robot"), ("arm_cam", "camera"), ("x_j", "robot"))
        for robot_id, kind in kinds:
            announced.append(Announcer(make_ros_bus(f"{robot_id}_announcer"), ResourceDescriptor(robot_id, kind)))

        def crossed() -> bool:
            for publisher in out.values():
                publisher.publish(payload)
            return bool(acks["arm_j"])

        assert wait_until(crossed, 20.0, 0.2), node.counts()
        time.sleep(1.0)
        assert acks["arm_cam"] == [] and acks["x_j"] == []  # a camera matching admit's pattern, a robot not matching
        assert "/arm_j/transitions" in node.counts() and "/arm_j/episode_acks" in node.counts()
    finally:
        for announcer in announced:
            announcer.close()
        cloud.close()
        node.destroy()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"to_zenoh": ["/x std_msgs/msg/String"], "to_ros": ["/x std_msgs/msg/String"]}, "/x in both directions"),
        ({"to_zenoh": ["/x"]}, "'/x' is not 'TOPIC TYPE [reliable|best_effort|latched]'"),
        ({"to_ros": ["/x std_msgs/msg/String fast"]}, "is not 'TOPIC TYPE"),
        ({"robots": ["arm"], "to_ros": ["/arm/transitions user/msg/Transition"]}, "/arm/transitions in both"),
    ],
)
def test_bad_routes_are_refused(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("|", r"\|")):
        from_mapping(BridgeParams, params, where="bridge").routes()


def test_user_bridge_runs_the_bridge_on_rclpy(
    make_ros_bus: Callable[..., Bus], router_endpoint: str, tmp_path: Path
) -> None:
    log = open(tmp_path / "bridge.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        user_cmd("bridge", "--robots", "arm_c", "--router", router_endpoint, "--domain", "bridged", "--name", "site_c",
                 "--to-ros", "/site_c/cmd std_msgs/msg/String latched"),
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    cloud = _zenoh("cloud_c", router_endpoint)
    try:
        events = collect(cloud, "/arm_c/episode_events", "user/msg/EpisodeEvent")
        out = make_ros_bus("arm_c").create_publisher("/arm_c/episode_events", "user/msg/EpisodeEvent")
        command = cloud.create_publisher("/site_c/cmd", STRING, LATCHED)
        command.publish(b"\x00\x01\x00\x00\x03\x00\x00\x00go\x00")
        cmds = collect(make_ros_bus("listener_c"), "/site_c/cmd", STRING, LATCHED)

        def crossed() -> bool:
            out.publish(b"\x00\x01\x00\x00event")
            return bool(events)

        assert wait_until(crossed, 60.0, 0.3), (tmp_path / "bridge.log").read_text()
        assert wait_until(lambda: bool(cmds), 30.0)  # latched: the late DDS subscriber still gets it
        assert "site_c" in cloud.node_names(0.5) or "site_c_zenoh" in cloud.node_names(0.5)
    finally:
        cloud.close()
        proc.send_signal(2)
        code = proc.wait(30)
        log.close()
    assert code == 0, (tmp_path / "bridge.log").read_text()
