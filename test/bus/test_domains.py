"""Domains on the Zenoh runtime (issue 15): a key prefix per deployment, like ROS_DOMAIN_ID. Sessions of
different domains share one router and never see each other's topics, services, nodes or tokens."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import zenoh

from test.conftest import wait_until
from test.helpers.collect import collect
from user.bus.base import ServiceError
from user.bus.names import in_domain, out_of_domain
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ENV_DOMAIN, InvalidDomainError, ZenohSettings, session_config

STRING = "std_msgs/msg/String"
TRIGGER = "std_srvs/srv/Trigger"


@pytest.fixture
def in_domain_bus(router_endpoint: str) -> Iterator[Callable[[str, str], ZenohBus]]:
    """Factory of buses in a given domain on the shared test router."""
    buses: list[ZenohBus] = []

    def make(name: str, domain: str) -> ZenohBus:
        bus = ZenohBus(name, ZenohSettings(router=[router_endpoint], domain=domain))
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


def test_messages_stay_inside_their_domain(in_domain_bus: Callable[[str, str], ZenohBus], topic: str) -> None:
    same = collect(in_domain_bus("same", "lab_a"), topic, STRING)
    other = collect(in_domain_bus("other", "lab_b"), topic, STRING)
    plain = collect(in_domain_bus("plain", ""), topic, STRING)
    pub = in_domain_bus("talker", "lab_a").create_publisher(topic, STRING)
    assert pub.wait_for_subscribers(5.0)
    for k in range(5):
        pub.publish(b"\x00\x01\x00\x00" + bytes([k]))
    assert wait_until(lambda: len(same) == 5, 5.0)
    time.sleep(0.3)  # what would leak into the other domains has had the time to arrive
    assert other == [] and plain == []


def test_the_domain_is_the_first_chunk_of_the_key(router_endpoint: str, topic: str) -> None:
    """`lab_a` + /t -> lab_a/t: what zenoh-bridge-ros2dds with namespace /lab_a would use."""
    raw = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    bus = ZenohBus("keyed", ZenohSettings(router=[router_endpoint], domain="lab_a"))
    try:
        got: list[bytes] = []
        raw.declare_subscriber(f"lab_a{topic}", lambda s: got.append(s.payload.to_bytes()))
        pub = bus.create_publisher(topic, STRING)
        assert pub.wait_for_subscribers(5.0)
        pub.publish(b"x")
        assert wait_until(lambda: got == [b"x"], 5.0)
    finally:
        bus.close()
        raw.close()  # type: ignore[no-untyped-call]


def test_graph_and_nodes_are_per_domain(in_domain_bus: Callable[[str, str], ZenohBus], topic: str) -> None:
    a = in_domain_bus("node_in_a", "lab_a")
    a.create_publisher(topic, STRING)
    b = in_domain_bus("node_in_b", "lab_b")
    a_view = in_domain_bus("viewer_a", "lab_a")
    assert wait_until(lambda: topic in a_view.topic_names_and_types(0.3), 5.0)
    assert "node_in_a" in a_view.node_names(0.3)
    assert topic not in b.topic_names_and_types(0.5)
    assert "node_in_a" not in b.node_names(0.5)
    assert a_view.count_subscribers(topic, 0.3) == 0


def test_services_answer_only_inside_their_domain(in_domain_bus: Callable[[str, str], ZenohBus], topic: str) -> None:
    server = in_domain_bus("server", "lab_a")
    server.create_service(topic, TRIGGER, lambda request: b"pong")
    client_a = in_domain_bus("client_a", "lab_a")
    assert wait_until(lambda: _answers(client_a, topic), 5.0)
    with pytest.raises(ServiceError, match="no server"):
        in_domain_bus("client_b", "lab_b").call_service(topic, TRIGGER, b"", timeout_s=1.0)


def _answers(bus: ZenohBus, name: str) -> bool:
    try:
        return bus.call_service(name, TRIGGER, b"", timeout_s=1.0) == b"pong"
    except ServiceError:
        return False


def test_tokens_are_watched_inside_the_domain_and_keyed_without_it(
    in_domain_bus: Callable[[str, str], ZenohBus],
) -> None:
    seen_a: list[str] = []
    seen_b: list[str] = []
    in_domain_bus("watch_a", "lab_a").watch_tokens("@user/test_tokens", lambda key, up: seen_a.append(key))
    in_domain_bus("watch_b", "lab_b").watch_tokens("@user/test_tokens", lambda key, up: seen_b.append(key))
    in_domain_bus("owner", "lab_a").declare_token("@user/test_tokens/arm_1")
    assert wait_until(lambda: seen_a == ["@user/test_tokens/arm_1"], 5.0)
    time.sleep(0.3)
    assert seen_b == []


def test_domain_from_the_environment_and_refused_when_not_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DOMAIN, "lab_b")
    assert ZenohSettings.from_env().domain == "lab_b"
    monkeypatch.setenv(ENV_DOMAIN, "lab/b")
    with pytest.raises(InvalidDomainError, match=r"invalid domain 'lab/b'.*USER_DOMAIN"):
        ZenohSettings.from_env()
    assert ZenohSettings.from_env(domain="").domain == ""


def test_in_and_out_of_domain_are_inverse() -> None:
    assert in_domain("lab_a", "robot/obs") == "lab_a/robot/obs"
    assert out_of_domain("lab_a", "lab_a/robot/obs") == "robot/obs"
    assert in_domain("", "robot/obs") == "robot/obs" == out_of_domain("", "robot/obs")
    assert out_of_domain("lab_a", "lab_ab/robot") == "lab_ab/robot"
