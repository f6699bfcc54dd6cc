"""`/diagnostics`: statuses to DiagnosticArray, the publication period from the environment, a failing
`diagnostics()` reported as ERROR instead of stopping the node, and a node process's statuses shown by
`user topic echo /diagnostics`."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from test.conftest import REPO, user_cmd, wait_until
from test.helpers.processes import LoggedProcess, started_processes
from user.bus.zenoh_bus import ZenohBus
from user.interfaces import default_codec
from user.runtime.diagnostics import (
    ERROR,
    OK,
    WARN,
    DiagnosticsPublisher,
    Status,
    period_from_env,
    to_message,
)
from user.runtime.node import Node


def test_statuses_become_a_diagnostic_array_that_round_trips_cdr() -> None:
    codec = default_codec()
    statuses = [
        Status("arm: robot", WARN, "holding", {"steps": 3, "ratio": 0.123456}, "arm"),
        Status("arm: camera wrist", ERROR, "dead?", {}, "wrist"),
    ]
    msg = to_message(statuses, 1_500_000_000, codec)
    back = codec.decode(codec.encode(msg, "diagnostic_msgs/msg/DiagnosticArray"), "diagnostic_msgs/msg/DiagnosticArray")
    assert (back.header.stamp.sec, back.header.stamp.nanosec) == (1, 500_000_000)
    assert [(s.name, s.level, s.message, s.hardware_id) for s in back.status] == [
        ("arm: robot", WARN, "holding", "arm"),
        ("arm: camera wrist", ERROR, "dead?", "wrist"),
    ]
    assert {kv.key: kv.value for kv in back.status[0].values} == {"steps": "3", "ratio": "0.1235"}


def test_a_level_outside_the_standard_four_is_refused() -> None:
    with pytest.raises(ValueError, match=r"0\.\.3"):
        Status("x: y", 4, "?")


@pytest.mark.parametrize(("text", "period"), [("", 1.0), ("0", 0.0), ("2.5", 2.5)])
def test_period_from_the_environment(text: str, period: float) -> None:
    assert period_from_env({"USER_DIAGNOSTICS_PERIOD_S": text} if text else {}) == period


@pytest.mark.parametrize("text", ["soon", "-1", "nan", "inf"])
def test_a_bad_period_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match="USER_DIAGNOSTICS_PERIOD_S"):
        period_from_env({"USER_DIAGNOSTICS_PERIOD_S": text})


class Broken(Node):
    def diagnostics(self) -> list[Status]:
        raise RuntimeError("sensor table corrupt")


def test_a_failing_diagnostics_is_published_as_error_and_the_publisher_goes_on(
    make_bus: Callable[..., ZenohBus],
) -> None:
    probe = Node(make_bus("probe"))
    got: list[Any] = []
    lock = threading.Lock()

    def on(msg: Any) -> None:
        with lock:
            got.append(msg)

    probe.create_subscription("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", on)
    node = Broken(make_bus("broken"))
    publisher = DiagnosticsPublisher(node, 0.1)
    try:
        assert wait_until(lambda: len(got) >= 2, 10.0)
    finally:
        publisher.close()
    status = got[-1].status[0]
    assert status.level == ERROR and status.name == "broken: node"
    assert "RuntimeError: sensor table corrupt" in status.message
    count = publisher.published
    publisher.publish()  # closed: nothing more goes out
    assert publisher.published == count


def test_the_base_node_reports_failure_and_malformed_messages(make_bus: Callable[..., ZenohBus]) -> None:
    node = Node(make_bus("plain"))
    assert [(s.level, s.message) for s in node.diagnostics()] == [(OK, "running")]
    node.malformed_messages = 2
    assert node.diagnostics()[0].level == WARN and "2 malformed" in node.diagnostics()[0].message
    node.fail("the control thread died")
    assert node.diagnostics()[0].level == ERROR and "the control thread died" in node.diagnostics()[0].message


@pytest.fixture
def node_process(zenoh_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., LoggedProcess]]:
    yield from started_processes(lambda args: user_cmd("node", *args), zenoh_env, tmp_path)


def test_a_node_process_publishes_diagnostics_that_topic_echo_shows(
    node_process: Callable[..., LoggedProcess], zenoh_env: dict[str, str], topic: str
) -> None:
    talker = node_process("talker", "--name", "chatty", "-p", f"topic:={topic}")
    assert talker.wait_for("running"), talker.text()
    proc = subprocess.run(
        user_cmd("topic", "echo", "/diagnostics", "--once", "--timeout", "30"),
        env=zenoh_env,
        capture_output=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    doc = yaml.safe_load(proc.stdout.decode().split("---")[0])
    names = {s["name"]: s for s in doc["status"]}
    assert (names["chatty: node"]["level"], names["chatty: node"]["message"]) == (OK, "running")
    assert {kv["key"]: kv["value"] for kv in names["chatty: node"]["values"]}["kind"] == "Talker"
    talker.stop()


def test_counting_framing_logging_and_the_environment(
    make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    codec = default_codec()
    msg = to_message([Status("a: b", OK, "ok", {"big": 123456, "x": 0.5})], 0, codec)
    assert msg.header.frame_id == "" and {kv.key: kv.value for kv in msg.status[0].values} == {
        "big": "123456",
        "x": "0.5",
    }
    monkeypatch.setenv("USER_DIAGNOSTICS_PERIOD_S", "3")
    assert period_from_env() == 3.0
    node = Broken(make_bus("broken2"))
    publisher = DiagnosticsPublisher(node, 100.0)  # the timer never fires within the test
    try:
        assert publisher.published == 0
        with caplog.at_level("ERROR"):
            publisher.publish()
            publisher.publish()
        assert publisher.published == 2
        assert "diagnostics of node broken2 failed" in caplog.text
    finally:
        publisher.close()
