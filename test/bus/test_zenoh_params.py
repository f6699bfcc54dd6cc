"""A node's parameter services on Zenoh (`user.runtime.zenoh_params`), called from another session as `user param` does,
and the QoS its graph tokens announce (`user.bus.zenoh_graph`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.base import BEST_EFFORT, ServiceError
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError, setting
from user.interfaces.codec import default_codec
from user.interfaces.convert import from_data, to_data
from user.runtime.zenoh_params import (
    GET,
    LIST,
    SET,
    ensure_types,
    infer_type,
    serve_parameters,
    service_name,
    to_value_data,
    value_of,
)


@dataclass
class Params:
    rate_hz: float = setting(2.0, "rate", min=0.1, live=True)
    label: str = setting("a", "label", live=True)
    gains: list[float] = setting([1.0, 2.0], "gains")


def call(client: ZenohBus, node: str, srv: str, request: dict[str, Any]) -> dict[str, Any]:
    codec = default_codec()
    ensure_types(codec)
    payload = codec.encode(from_data(f"{srv}_Request", request, codec), f"{srv}_Request")

    def answered() -> bool:
        try:
            answers.append(client.call_service(service_name(node, srv), srv, payload, 5.0))
        except ServiceError:
            return False
        return True

    answers: list[bytes] = []
    assert wait_until(answered, 10.0, 0.1)  # a fresh session may not know the queryable at once
    return to_data(codec.decode(answers[0], f"{srv}_Response"), codec)


@pytest.fixture
def served(make_bus: Callable[..., ZenohBus]) -> tuple[ZenohBus, ZenohBus, list[Params]]:
    node = make_bus("param_node", {"rate_hz": 4.0})
    applied: list[Params] = []

    def on_change(new: Params) -> None:
        if new.label == "refuse":
            raise ConfigError("label 'refuse' is refused by the node")
        applied.append(new)

    node.declare_parameters(Params, on_change)
    assert node.parameter_store is not None
    assert serve_parameters(node, node.parameter_store) is not None  # what the runner does for every node
    return node, make_bus("param_client"), applied


def test_list_and_get_answer_from_the_running_values(served: tuple[ZenohBus, ZenohBus, list[Params]]) -> None:
    _, client, _ = served
    assert call(client, "param_node", LIST, {})["result"]["names"] == ["rate_hz", "label", "gains"]
    values = call(client, "param_node", GET, {"names": ["rate_hz", "gains", "nothing"]})["values"]
    assert [value_of(v) for v in values] == [4.0, [1.0, 2.0], None]
    assert [v["type"] for v in values] == [3, 8, 0]


def test_set_applies_all_or_nothing_and_returns_the_refusal(served: tuple[ZenohBus, ZenohBus, list[Params]]) -> None:
    _, client, applied = served
    ok = call(client, "param_node", SET, {"parameters": [{"name": "label", "value": to_value_data("b", 4)}]})
    assert ok["results"] == [{"successful": True, "reason": ""}]
    assert value_of(call(client, "param_node", GET, {"names": ["label"]})["values"][0]) == "b"
    assert applied[-1].label == "b"
    both = [
        {"name": "rate_hz", "value": to_value_data(9.0, 3)},
        {"name": "label", "value": to_value_data("refuse", 4)},
    ]
    refused = call(client, "param_node", SET, {"parameters": both})["results"]
    assert [r["successful"] for r in refused] == [False, False]
    assert "label 'refuse' is refused by the node" in refused[0]["reason"]
    rate = call(client, "param_node", GET, {"names": ["rate_hz"]})["values"][0]
    assert value_of(rate) == 4.0  # nothing of the refused change applied
    read_only = call(client, "param_node", SET, {"parameters": [{"name": "gains", "value": to_value_data([3], 8)}]})
    assert "gains is read-only" in read_only["results"][0]["reason"]


def test_a_tool_s_endpoints_announce_their_qos(make_bus: Callable[..., ZenohBus], topic: str) -> None:
    bus = make_bus("qos_node")
    bus.create_publisher(topic, "std_msgs/msg/String", BEST_EFFORT)
    bus.create_subscription(topic, "std_msgs/msg/String", lambda _: None)
    mine = [e for e in bus.graph_endpoints(1.0) if e.name == topic]
    assert sorted((e.role, e.node, e.qos) for e in mine) == [
        ("pub", "qos_node", "best_effort.volatile.1"),
        ("sub", "qos_node", "reliable.volatile.10"),
    ]


@pytest.mark.parametrize(
    ("value", "tp"),
    [
        (True, 1),
        (3, 2),
        (2.5, 3),
        ("x", 4),
        ([True], 6),
        ([1, 2], 7),
        ([1, 2.5], 8),
        (["a"], 9),
        ({"a": 1}, 0),
        ([], 0),
    ],
)
def test_set_infers_the_ros_type_from_yaml(value: Any, tp: int) -> None:
    assert infer_type(value) == tp
