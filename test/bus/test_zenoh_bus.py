"""ZenohBus over a real Zenoh router: pub/sub, latched topics, services, timers, tokens, graph."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest
import zenoh

from test.conftest import free_port, wait_until
from user.bus.base import (
    BEST_EFFORT,
    LATCHED,
    RELIABLE,
    BusClosedError,
    RouterUnreachableError,
    ServiceError,
    ServiceTimeoutError,
)
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings

MakeBus = Callable[..., ZenohBus]


def _collector() -> tuple[list[bytes], threading.Event, Callable[[bytes], None]]:
    got: list[bytes] = []
    event = threading.Event()

    def on(payload: bytes) -> None:
        got.append(payload)
        event.set()

    return got, event, on


def _wait_matched(pub: object, timeout_s: float = 5.0) -> None:
    assert pub.wait_for_subscribers(timeout_s)  # type: ignore[attr-defined]


def test_reliable_pubsub_between_two_buses_keeps_order(make_bus: MakeBus, topic: str) -> None:
    a, b = make_bus("a"), make_bus("b")
    got, _, on = _collector()
    b.create_subscription(topic, "std_msgs/msg/String", on, RELIABLE)
    pub = a.create_publisher(topic, "std_msgs/msg/String", RELIABLE)
    _wait_matched(pub)
    sent = [i.to_bytes(4, "little") * 8 for i in range(2000)]
    for payload in sent:
        pub.publish(payload)
    assert wait_until(lambda: len(got) == len(sent), 10.0)
    assert got == sent


def test_best_effort_delivers_when_not_congested(make_bus: MakeBus, topic: str) -> None:
    a, b = make_bus("a"), make_bus("b")
    _got, event, on = _collector()
    b.create_subscription(topic, "std_msgs/msg/String", on, BEST_EFFORT)
    pub = a.create_publisher(topic, "std_msgs/msg/String", BEST_EFFORT)
    _wait_matched(pub)
    pub.publish(b"x")
    assert event.wait(5.0)


def test_latched_topic_reaches_a_late_subscriber(make_bus: MakeBus, topic: str) -> None:
    a = make_bus("a")
    pub = a.create_publisher(topic, "std_msgs/msg/String", LATCHED)
    pub.publish(b"old")
    pub.publish(b"latest")
    time.sleep(0.2)
    b = make_bus("b")
    got, _, on = _collector()
    b.create_subscription(topic, "std_msgs/msg/String", on, LATCHED)
    assert wait_until(lambda: got == [b"latest"], 5.0), got


def test_raw_zenoh_session_sees_bus_messages_on_the_bridge_key(
    make_bus: MakeBus, topic: str, router_endpoint: str
) -> None:
    """Key = topic without the leading '/', payload unchanged: what zenoh-bridge-ros2dds speaks."""
    from user.bus.zenoh_config import session_config

    raw = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    try:
        got, event, _ = _collector()
        sub = raw.declare_subscriber(topic.lstrip("/"), lambda s: (got.append(s.payload.to_bytes()), event.set()))
        pub = make_bus("a").create_publisher(topic, "std_msgs/msg/String")
        _wait_matched(pub)
        pub.publish(b"\x00\x01\x00\x00payload")
        assert event.wait(5.0)
        assert got == [b"\x00\x01\x00\x00payload"]
        sub.undeclare()
    finally:
        raw.close()


def test_callbacks_of_one_bus_never_overlap(make_bus: MakeBus, topic: str) -> None:
    a, b = make_bus("a"), make_bus("b")
    active = 0
    overlaps = 0
    calls = 0

    def slow(_payload: bytes = b"") -> None:
        nonlocal active, overlaps, calls
        active += 1
        overlaps += active > 1
        time.sleep(0.002)
        active -= 1
        calls += 1

    b.create_subscription(topic, "std_msgs/msg/String", slow)
    b.create_timer(0.001, slow)
    pub = a.create_publisher(topic, "std_msgs/msg/String")
    _wait_matched(pub)
    for _ in range(100):
        pub.publish(b"x")
    assert wait_until(lambda: calls > 150, 10.0)
    assert overlaps == 0


def test_timer_period_and_cancel(make_bus: MakeBus) -> None:
    bus = make_bus("t")
    ticks: list[float] = []
    timer = bus.create_timer(0.05, lambda: ticks.append(time.monotonic()))
    assert wait_until(lambda: len(ticks) >= 6, 5.0)
    timer.close()
    count = len(ticks)
    time.sleep(0.2)
    assert len(ticks) <= count + 1
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert 0.02 < sorted(gaps)[len(gaps) // 2] < 0.2  # median period near 50 ms (loose: shared machine)
    with pytest.raises(ValueError, match="positive"):
        bus.create_timer(0.0, lambda: None)


def test_a_raising_callback_does_not_stop_delivery(
    make_bus: MakeBus, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = make_bus("a"), make_bus("b")
    got: list[bytes] = []

    def on(payload: bytes) -> None:
        got.append(payload)
        if payload == b"boom":
            raise RuntimeError("bug in callback")

    b.create_subscription(topic, "std_msgs/msg/String", on)
    pub = a.create_publisher(topic, "std_msgs/msg/String")
    _wait_matched(pub)
    pub.publish(b"boom")
    pub.publish(b"after")
    assert wait_until(lambda: got == [b"boom", b"after"], 5.0)
    assert "bug in callback" in caplog.text and topic in caplog.text


def test_service_call_roundtrip_and_errors(make_bus: MakeBus, topic: str) -> None:
    server, client = make_bus("server"), make_bus("client")

    def handler(request: bytes) -> bytes:
        if request == b"fail":
            raise ValueError("bad request")
        if request == b"slow":
            time.sleep(1.0)
        return request[::-1]

    server.create_service(topic, "user/srv/Reset", handler)
    assert wait_until(lambda: _answers(client, topic), 5.0)
    assert client.call_service(topic, "user/srv/Reset", b"abc", 2.0) == b"cba"
    with pytest.raises(ServiceError, match="bad request"):
        client.call_service(topic, "user/srv/Reset", b"fail", 2.0)
    start = time.monotonic()
    with pytest.raises(ServiceTimeoutError, match="did not answer within 0.3"):
        client.call_service(topic, "user/srv/Reset", b"slow", 0.3)
    assert time.monotonic() - start < 0.9
    with pytest.raises(ServiceError, match="no server"):
        client.call_service(f"{topic}_nobody", "user/srv/Reset", b"", 2.0)


def _answers(bus: ZenohBus, name: str) -> bool:
    try:
        bus.call_service(name, "user/srv/Reset", b"ping", 1.0)
        return True
    except ServiceError:
        return False


def test_tokens_appear_and_vanish(make_bus: MakeBus) -> None:
    a, b = make_bus("a"), make_bus("b")
    events: list[tuple[str, bool]] = []
    b.watch_tokens("@user/test_tokens", lambda key, alive: events.append((key, alive)))
    token = a.declare_token("@user/test_tokens/robot_1")
    assert wait_until(lambda: ("@user/test_tokens/robot_1", True) in events, 5.0)
    token.close()
    assert wait_until(lambda: ("@user/test_tokens/robot_1", False) in events, 5.0)


def test_tokens_vanish_when_the_owner_closes(make_bus: MakeBus) -> None:
    a, b = make_bus("a"), make_bus("b")
    a.declare_token("@user/test_tokens2/x")
    events: list[tuple[str, bool]] = []
    b.watch_tokens("@user/test_tokens2", lambda key, alive: events.append((key, alive)))
    assert wait_until(lambda: ("@user/test_tokens2/x", True) in events, 5.0)  # existing tokens come first
    a.close()
    assert wait_until(lambda: ("@user/test_tokens2/x", False) in events, 5.0)


def test_graph_lists_topics_types_and_nodes(make_bus: MakeBus, topic: str) -> None:
    a, b = make_bus("graph_a"), make_bus("graph_b")
    a.create_publisher(topic, "std_msgs/msg/String")
    b.create_subscription(f"{topic}_in", "sensor_msgs/msg/JointState", lambda _p: None)
    assert wait_until(lambda: topic in b.topic_names_and_types(0.5), 5.0)
    graph = b.topic_names_and_types(0.5)
    assert graph[topic] == ["std_msgs/msg/String"]
    assert graph[f"{topic}_in"] == ["sensor_msgs/msg/JointState"]
    assert {"graph_a", "graph_b"} <= set(a.node_names(0.5))


def test_parameters_are_checked(make_bus: MakeBus) -> None:
    from user.config.strict import ConfigError
    from user.nodes.demo import TalkerParams

    assert make_bus("p", {"rate_hz": 5}).declare_parameters(TalkerParams).rate_hz == 5.0
    with pytest.raises(ConfigError, match="parameters of node 'q'.*unknown key 'rate'"):
        make_bus("q", {"rate": 5}).declare_parameters(TalkerParams)


def test_no_router_fails_fast_and_clearly() -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(RouterUnreachableError) as err:
        ZenohBus("lonely", ZenohSettings(router=[endpoint], router_timeout_s=0.5))
    assert time.monotonic() - start < 5.0
    assert endpoint in str(err.value) and "user router" in str(err.value) and "lonely" in str(err.value)


def test_closed_bus_refuses_use(make_bus: MakeBus, topic: str) -> None:
    bus = make_bus("c")
    bus.close()
    bus.close()  # idempotent
    with pytest.raises(BusClosedError):
        bus.create_publisher(topic, "std_msgs/msg/String")
