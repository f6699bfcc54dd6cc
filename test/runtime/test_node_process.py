"""A node as its own process (`user node KIND`): malformed input, shutdown on signals, startup errors."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zenoh

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.processes import LoggedProcess, started_processes
from user.bus.zenoh_config import ZenohSettings, session_config
from user.interfaces import default_codec
from user.runtime.status import ENV_STATUS_FILE, EXIT_CONFIG_ERROR, EXIT_UNAVAILABLE, NodeStatus, read_status


@pytest.fixture
def node_process(zenoh_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., LoggedProcess]]:
    """`node_process(*args)`: `user node ARGS` on the Zenoh runtime."""
    yield from started_processes(lambda args: user_cmd("node", *args), zenoh_env, tmp_path)


def test_malformed_payload_is_logged_and_the_node_keeps_running(
    node_process: Callable[..., LoggedProcess], router_endpoint: str, topic: str
) -> None:
    listener = node_process("listener", "--name", "ears", "-p", f"topic:={topic}")
    assert listener.wait_for("running")
    raw = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    try:
        pub = raw.declare_publisher(topic.lstrip("/"), congestion_control=zenoh.CongestionControl.BLOCK)
        # zenoh's stub types matching_status as a bool; it is a MatchingStatus
        assert wait_until(lambda: pub.matching_status.matching, 10.0)  # type: ignore[attr-defined]
        pub.put(b"\x00\x01\x00\x00\xff\xff\xff\x7fgarbage")  # string length far beyond the payload
        pub.put(b"\x07")  # shorter than a CDR header
        codec = default_codec()
        pub.put(codec.encode(codec.msg_class("std_msgs/msg/String")(data="still alive")))
        assert listener.wait_for('I heard: "still alive"'), listener.text()
    finally:
        raw.close()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated
    text = listener.text()
    assert text.count("dropped a malformed message") == 2
    assert f"on {topic} (std_msgs/msg/String" in text
    assert listener.proc.poll() is None
    code, _ = listener.stop()
    assert code == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_a_node_within_5s_with_exit_0(node_process, topic: str, sig: int) -> None:  # type: ignore[no-untyped-def]
    talker = node_process("talker", "-p", f"topic:={topic}", "-p", "rate_hz:=50.0")
    assert talker.wait_for("Publishing"), talker.text()
    code, elapsed = talker.stop(sig)
    assert code == 0, talker.text()
    assert elapsed < 5.0
    assert "shutting down" in talker.text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_node_stopped_by_a_signal_leaves_stopped_as_its_status(
    tmp_path: Path, zenoh_env: dict[str, str], topic: str, sig: int
) -> None:
    """Its status used to say `running` after the clean stop, and `user report` showed every node as running."""
    status = tmp_path / "talker.status"
    env = dict(zenoh_env, **{ENV_STATUS_FILE: str(status)})
    talker = LoggedProcess(user_cmd("node", "talker", "-p", f"topic:={topic}"), env, tmp_path / "talker.log")
    try:
        assert wait_until(lambda: read_status(status) == NodeStatus("running"), 30.0), talker.text()
    finally:
        code, _ = talker.stop(sig)
    assert code == 0, talker.text()
    assert read_status(status) == NodeStatus("stopped"), status.read_text()


def test_bad_parameter_fails_at_startup_naming_it(node_process) -> None:  # type: ignore[no-untyped-def]
    node = node_process("talker", "-p", "rate_hz:=fast")
    assert node.proc.wait(20) == EXIT_CONFIG_ERROR
    assert "rate_hz" in node.text() and "expected a number" in node.text()
    node = node_process("talker", "-p", "rat_hz:=3")
    assert node.proc.wait(20) == 2
    assert "unknown key 'rat_hz'" in node.text()


def test_unknown_kind_fails_listing_kinds(node_process) -> None:  # type: ignore[no-untyped-def]
    node = node_process("talkr")
    assert node.proc.wait(20) == 2
    assert "unknown node kind 'talkr'" in node.text() and "talker" in node.text()


def test_no_router_says_so_instead_of_waiting(tmp_path: Path, zenoh_env: dict[str, str]) -> None:
    env = dict(zenoh_env, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{free_port()}")
    start = time.monotonic()
    proc = subprocess.run(user_cmd("node", "listener"), env=env, capture_output=True, timeout=30)
    assert proc.returncode == EXIT_UNAVAILABLE  # not a configuration error: a launcher may respawn it
    assert time.monotonic() - start < 15
    assert b"no Zenoh router reachable" in proc.stderr and b"user router" in proc.stderr


def test_the_status_line_says_running_or_why_the_node_could_not_start(
    tmp_path: Path, zenoh_env: dict[str, str], topic: str
) -> None:
    """What a launcher reads: `running`, or the state and the one-line reason of a failed start."""
    status = tmp_path / "talker.status"
    env = dict(zenoh_env, **{ENV_STATUS_FILE: str(status)})
    bad = subprocess.run(user_cmd("node", "talker", "-p", "rate_hz:=-1.0"), env=env, capture_output=True, timeout=60)
    assert bad.returncode == EXIT_CONFIG_ERROR
    failed = read_status(status)
    assert failed is not None and failed.state == "config-error", status.read_text()
    assert failed.reason == "parameters of node 'talker': rate_hz: -1.0 is below the minimum 0.01"
    assert b"Traceback" not in bad.stderr

    unknown = subprocess.run(user_cmd("node", "talkr"), env=env, capture_output=True, timeout=60)
    assert unknown.returncode == EXIT_CONFIG_ERROR
    unknown_status = read_status(status)
    assert unknown_status is not None and unknown_status.state == "config-error"
    assert "unknown node kind 'talkr'" in unknown_status.reason

    no_router = dict(env, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{free_port()}")
    lost = subprocess.run(user_cmd("node", "listener"), env=no_router, capture_output=True, timeout=60)
    assert lost.returncode == EXIT_UNAVAILABLE
    state = read_status(status)
    assert state is not None and state.state == "failed" and "no Zenoh router reachable" in state.reason

    process = LoggedProcess(user_cmd("node", "talker", "-p", f"topic:={topic}"), env, tmp_path / "ok.log")
    try:
        assert process.wait_for("Publishing"), process.text()
        running = read_status(status)
        assert running is not None and running.state == "running" and running.reason == ""
    finally:
        assert process.stop()[0] == 0
