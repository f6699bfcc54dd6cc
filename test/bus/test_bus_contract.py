"""The Bus contract, on both runtimes: every test runs on Zenoh (a real router) and on ROS 2 (real rclpy and
Fast DDS on loopback, each bus its own participant).

Publish/subscribe of CDR bytes, reliable / best-effort / latched QoS, services with deadlines, timers,
parameters (typed, read-only unless live), presence tokens and the graph. Where the runtimes differ by
nature, the test says so (a ROS service cannot return an error).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.base import BEST_EFFORT, LATCHED, RELIABLE, Bus, BusClosedError, ServiceError, ServiceTimeoutError
from user.bus.parameters import ParameterRefusedError
from user.bus.ros_bus import RosBus
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError, setting
from user.interfaces import default_codec

MakeBus = Callable[..., Bus]
CODEC = default_codec()
STRING = "std_msgs/msg/String"
SRV = "user/srv/Checkpoint"  # request: a string tag; response: success, message, path, updates


def text(s: str) -> bytes:
    """The CDR bytes of a std_msgs/String (what both runtimes carry unchanged)."""
    return CODEC.encode(CODEC.msg_class(STRING)(data=s), STRING)


def request(tag: str) -> bytes:
    return CODEC.encode(CODEC.msg_class(f"{SRV}_Request")(tag=tag), f"{SRV}_Request")


def response(message: str) -> bytes:
    reply = CODEC.msg_class(f"{SRV}_Response")(success=True, message=message, path="", updates=0)
    return CODEC.encode(reply, f"{SRV}_Response")


def answer(payload: bytes) -> str:
    return str(CODEC.decode(payload, f"{SRV}_Response").message)


class Collector:
    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.event = threading.Event()

    def __call__(self, payload: bytes) -> None:
        self.got.append(payload)
        self.event.set()


def matched(pub: Any, timeout_s: float = 10.0) -> None:
    assert pub.wait_for_subscribers(timeout_s), f"no subscriber matched {pub.topic}"


def test_reliable_pubsub_keeps_every_message_in_order(make_any_bus: MakeBus, topic: str) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    inbox = Collector()
    b.create_subscription(topic, STRING, inbox, RELIABLE)
    pub = a.create_publisher(topic, STRING, RELIABLE)
    matched(pub)
    sent = [text(f"message {i}") for i in range(500)]
    for payload in sent:
        pub.publish(payload)
    assert wait_until(lambda: len(inbox.got) == len(sent), 15.0), f"{len(inbox.got)} of {len(sent)}"
    assert inbox.got == sent  # the same CDR bytes, none lost, none reordered


def test_best_effort_delivers_when_not_congested(make_any_bus: MakeBus, topic: str) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    inbox = Collector()
    b.create_subscription(topic, STRING, inbox, BEST_EFFORT)
    pub = a.create_publisher(topic, STRING, BEST_EFFORT)
    matched(pub)

    def publish_and_check() -> bool:
        pub.publish(text("x"))
        return inbox.event.is_set()

    assert wait_until(publish_and_check, 5.0, 0.05)
    assert inbox.got[0] == text("x")


def test_latched_topic_gives_a_late_subscriber_the_last_message(make_any_bus: MakeBus, topic: str) -> None:
    a = make_any_bus("a")
    pub = a.create_publisher(topic, STRING, LATCHED)
    pub.publish(text("old"))
    pub.publish(text("latest"))
    time.sleep(0.3)
    inbox = Collector()
    make_any_bus("b").create_subscription(topic, STRING, inbox, LATCHED)
    assert wait_until(lambda: inbox.got == [text("latest")], 10.0), inbox.got


def test_callbacks_of_one_bus_never_overlap(make_any_bus: MakeBus, topic: str) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    active = overlaps = calls = 0

    def slow(_payload: bytes = b"") -> None:
        nonlocal active, overlaps, calls
        active += 1
        overlaps += active > 1
        time.sleep(0.002)
        active -= 1
        calls += 1

    b.create_subscription(topic, STRING, slow)
    b.create_timer(0.001, slow)
    pub = a.create_publisher(topic, STRING)
    matched(pub)
    for _ in range(100):
        pub.publish(text("x"))
    assert wait_until(lambda: calls > 150, 15.0)
    assert overlaps == 0


def test_timer_period_and_close(make_any_bus: MakeBus) -> None:
    bus = make_any_bus("t")
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


def test_a_raising_callback_is_logged_and_delivery_goes_on(
    make_any_bus: MakeBus, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    got: list[bytes] = []

    def on(payload: bytes) -> None:
        got.append(payload)
        if payload == text("boom"):
            raise RuntimeError("bug in callback")

    b.create_subscription(topic, STRING, on)
    pub = a.create_publisher(topic, STRING)
    matched(pub)
    pub.publish(text("boom"))
    pub.publish(text("after"))
    assert wait_until(lambda: got == [text("boom"), text("after")], 5.0)
    assert "bug in callback" in caplog.text and topic in caplog.text


def _serve(bus: Bus, name: str) -> None:
    def handler(payload: bytes) -> bytes:
        tag = CODEC.decode(payload, f"{SRV}_Request").tag
        if tag == "fail":
            raise ValueError("bad request")
        if tag == "slow":
            time.sleep(1.0)
        return response(f"done {tag}")

    bus.create_service(name, SRV, handler)


def _answers(bus: Bus, name: str) -> bool:
    try:
        bus.call_service(name, SRV, request("ping"), 1.0)
        return True
    except ServiceError:
        return False


def test_service_calls_answer_and_keep_their_deadlines(make_any_bus: MakeBus, topic: str) -> None:
    server, client = make_any_bus("server"), make_any_bus("client")
    _serve(server, topic)
    assert wait_until(lambda: _answers(client, topic), 10.0)
    assert answer(client.call_service(topic, SRV, request("a"), 2.0)) == "done a"
    start = time.monotonic()
    with pytest.raises(ServiceTimeoutError, match="did not answer within 0.3"):
        client.call_service(topic, SRV, request("slow"), 0.3)
    assert time.monotonic() - start < 0.9
    start = time.monotonic()
    with pytest.raises(ServiceError, match="no server"):
        client.call_service(f"{topic}_nobody", SRV, request("x"), 0.5)
    assert time.monotonic() - start < 2.0


def test_a_raising_service_handler_is_logged_and_the_server_keeps_serving(
    make_any_bus: MakeBus, topic: str, runtime: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, client = make_any_bus("server"), make_any_bus("client")
    _serve(server, topic)
    assert wait_until(lambda: _answers(client, topic), 10.0)
    if runtime == "zenoh":
        with pytest.raises(ServiceError, match="bad request"):
            client.call_service(topic, SRV, request("fail"), 2.0)
    else:  # a ROS 2 service has no error reply: the caller gets an empty response
        assert answer(client.call_service(topic, SRV, request("fail"), 2.0)) == ""
    assert "bad request" in caplog.text
    assert answer(client.call_service(topic, SRV, request("b"), 2.0)) == "done b"


def test_a_callback_may_call_a_service(make_any_bus: MakeBus, topic: str) -> None:
    """A subscription callback waits on a call: the reply must not queue behind that same callback."""
    server, client, sender = make_any_bus("server"), make_any_bus("client"), make_any_bus("sender")
    _serve(server, f"{topic}_srv")
    assert wait_until(lambda: _answers(client, f"{topic}_srv"), 10.0)
    answers: list[str] = []
    client.create_subscription(
        topic, STRING, lambda _p: answers.append(answer(client.call_service(f"{topic}_srv", SRV, request("c"), 3.0)))
    )
    pub = sender.create_publisher(topic, STRING)
    matched(pub)
    pub.publish(text("go"))
    assert wait_until(lambda: answers == ["done c"], 10.0), answers


@pytest.mark.ros
def test_a_ros_service_is_called_through_one_long_lived_client(make_ros_bus: MakeBus, topic: str) -> None:
    server, client = make_ros_bus("server"), make_ros_bus("client")
    _serve(server, topic)
    assert wait_until(lambda: _answers(client, topic), 10.0)
    for i in range(5):
        client.call_service(topic, SRV, request(str(i)), 2.0)
    ros = client.client_node  # type: ignore[attr-defined]  # a RosBus
    clients = ros.get_client_names_and_types_by_node(ros.get_name(), ros.get_namespace())
    assert [name for name, _types in clients if name == topic] == [topic]


def test_tokens_appear_and_vanish(make_any_bus: MakeBus) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    events: list[tuple[str, bool]] = []
    b.watch_tokens("@user/test_tokens", lambda key, alive: events.append((key, alive)))
    token = a.declare_token("@user/test_tokens/robot_1")
    assert wait_until(lambda: ("@user/test_tokens/robot_1", True) in events, 10.0)
    token.close()
    assert wait_until(lambda: ("@user/test_tokens/robot_1", False) in events, 10.0)


def test_existing_tokens_come_first_and_vanish_with_their_owner(make_any_bus: MakeBus) -> None:
    a, b = make_any_bus("a"), make_any_bus("b")
    a.declare_token("@user/test_tokens2/x")
    time.sleep(0.5)
    events: list[tuple[str, bool]] = []
    b.watch_tokens("@user/test_tokens2", lambda key, alive: events.append((key, alive)))
    assert wait_until(lambda: ("@user/test_tokens2/x", True) in events, 10.0)
    a.close()
    assert wait_until(lambda: ("@user/test_tokens2/x", False) in events, 10.0)


def test_graph_lists_topics_types_and_subscribers(make_any_bus: MakeBus, topic: str) -> None:
    a, b = make_any_bus("graph_a"), make_any_bus("graph_b")
    a.create_publisher(topic, STRING)
    b.create_subscription(f"{topic}_in", "sensor_msgs/msg/JointState", lambda _p: None)
    assert wait_until(lambda: {topic, f"{topic}_in"} <= set(a.topic_names_and_types(0.5)), 10.0)
    graph = a.topic_names_and_types(0.5)
    assert graph[topic] == [STRING]
    assert graph[f"{topic}_in"] == ["sensor_msgs/msg/JointState"]
    assert not [t for t in graph if t.startswith("/_user")]  # presence tokens are not topics
    assert wait_until(lambda: a.count_subscribers(f"{topic}_in", 0.5) == 1, 10.0)
    assert a.count_subscribers(topic, 0.5) == 0


@dataclass(frozen=True)
class Gains:
    kp: float = setting(1.0, "proportional gain", min=0.0, live=True)
    names: tuple[str, ...] = setting(("a",), "joint names")


@dataclass(frozen=True)
class Settings:
    rate_hz: float = setting(10.0, "loop rate", min=0.1, live=True)
    label: str = setting("arm", "a fixed name")
    gains: Gains = setting(Gains(), "controller")
    extra: dict[str, Any] = setting({}, "free-form extras")


def parameters_of(bus: Bus) -> dict[str, Any]:
    """A node's current parameters by dotted name, where its parameter services read them (`user param get`:
    the node's `ParameterStore`; `ros2 param get`: the rclpy node's parameters)."""
    if isinstance(bus, ZenohBus):
        assert bus.parameter_store is not None
        return bus.parameter_store.current()
    assert isinstance(bus, RosBus)
    return {name: p.value for name, p in bus.node.get_parameters_by_prefix("").items()}


def test_parameters_are_declared_typed_and_checked(make_any_bus: MakeBus) -> None:
    bus = make_any_bus("params", {"rate_hz": 5, "gains": {"kp": 2.5}, "extra": {"speed": 0.1}}, Settings)
    values = bus.declare_parameters(Settings)
    assert values == Settings(rate_hz=5.0, gains=Gains(kp=2.5), extra={"speed": 0.1})
    current = parameters_of(bus)
    assert current["rate_hz"] == 5.0 and current["gains.kp"] == 2.5 and current["gains.names"] == ["a"]
    assert current["label"] == "arm" and current["extra"] == "{speed: 0.1}"
    with pytest.raises(ConfigError, match="parameters of node 'q'.*unknown key 'rate'"):
        make_any_bus("q", {"rate": 5}).declare_parameters(Settings)
    with pytest.raises(ConfigError, match=r"rate_hz: 0\.0 is below the minimum 0\.1"):
        make_any_bus("r", {"rate_hz": 0.0}).declare_parameters(Settings)


def test_live_parameters_change_and_fixed_ones_refuse(make_any_bus: MakeBus) -> None:
    bus = make_any_bus("live", {"rate_hz": 5.0}, Settings)
    applied: list[Settings] = []
    bus.declare_parameters(Settings, on_change=applied.append)
    bus.set_parameters({"rate_hz": 20.0, "gains.kp": 0.5})
    assert applied == [Settings(rate_hz=20.0, gains=Gains(kp=0.5))]
    assert parameters_of(bus)["rate_hz"] == 20.0
    with pytest.raises(ParameterRefusedError, match="label is read-only"):
        bus.set_parameters({"label": "other"})
    with pytest.raises(ParameterRefusedError, match="below the minimum"):
        bus.set_parameters({"rate_hz": 0.01})
    with pytest.raises(ParameterRefusedError, match="no parameter 'nope'"):
        bus.set_parameters({"nope": 1.0})

    def refuse(_new: Settings) -> None:
        raise ConfigError("the arm is moving")

    refusing = make_any_bus("refusing", {}, Settings)
    refusing.declare_parameters(Settings, on_change=refuse)
    with pytest.raises(ParameterRefusedError, match="the arm is moving"):
        refusing.set_parameters({"rate_hz": 2.0})
    assert parameters_of(refusing)["rate_hz"] == 10.0  # nothing of a refused change is kept
    assert parameters_of(bus)["label"] == "arm" and len(applied) == 1


def test_a_node_without_a_change_handler_has_only_fixed_parameters(make_any_bus: MakeBus) -> None:
    bus = make_any_bus("fixed", {}, Settings)
    bus.declare_parameters(Settings)
    with pytest.raises(ParameterRefusedError, match="applies no changes"):
        bus.set_parameters({"rate_hz": 2.0})


def test_a_closed_bus_refuses_use(make_any_bus: MakeBus, topic: str) -> None:
    bus = make_any_bus("c")
    bus.close()
    bus.close()  # idempotent
    with pytest.raises(BusClosedError):
        bus.create_publisher(topic, STRING)
