"""`user view` on a real running sim deployment: a Zenoh router, a simulated Franka robot node and, later, a talker,
in processes of their own. A Foxglove WebSocket client written from the protocol (test/viewer/client.py) checks the
channels (ros2msg schemas as the codec writes them, CDR), that the robot's messages arrive byte for byte as
published and decode with the codec, that a topic appearing later is served, that a topic of an unknown type is
skipped with one warning, and that the command stops cleanly on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from test.conftest import REPO, free_port, user_cmd, wait_until
from test.helpers.processes import LoggedProcess, started_processes
from test.viewer.client import FoxgloveClient
from test.viewer.running import view_cmd
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ENV_DOMAIN, ZenohSettings
from user.interfaces.codec import default_codec

pytestmark = pytest.mark.timeout(240)

START_S = 90.0  # a robot node (MuJoCo) running, on a loaded 2-core machine
REDISCOVERED_S = 60.0  # a topic announced is served within this (the viewer looks for new topics every 0.5 s)
ARRIVE_S = 90.0  # a served topic's messages reach the client, on a loaded 2-core machine
ROBOT = "franka_left"
JOINTS = f"/{ROBOT}/joint_states"
UNKNOWN = "/viewer_mystery"
LATE = "/viewer_late_chatter"


@pytest.fixture
def domain() -> str:
    """A domain of this test's own: the viewer sees this deployment only."""
    return f"view_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def procs(zenoh_env: dict[str, str], domain: str, tmp_path: Path) -> Iterator[Callable[..., LoggedProcess]]:
    env = {**zenoh_env, ENV_DOMAIN: domain}
    yield from started_processes(lambda args: args, env, tmp_path)


@pytest.fixture
def watcher(router_endpoint: str, domain: str) -> Iterator[ZenohBus]:
    """The test's own bus in the deployment's domain: a direct subscriber and the graph as nodes announce it."""
    bus = ZenohBus("view_test_watcher", ZenohSettings(router=[router_endpoint], domain=domain))
    yield bus
    bus.close()


class Direct:
    """Payloads of a topic as a plain subscriber of the deployment receives them."""

    def __init__(self, bus: ZenohBus, topic: str) -> None:
        self.payloads: list[bytes] = []
        self._lock = threading.Lock()
        bus.create_subscription(topic, "sensor_msgs/msg/JointState", self._take)

    def _take(self, payload: bytes) -> None:
        with self._lock:
            self.payloads.append(payload)

    def seen(self) -> set[bytes]:
        with self._lock:
            return set(self.payloads)


def _start_viewer(procs: Callable[..., LoggedProcess], router: str, domain: str) -> tuple[LoggedProcess, int]:
    port = free_port()
    viewer = procs(*view_cmd("--router", router, "--domain", domain, "--port", str(port), "--rediscover", "0.5"))
    assert viewer.wait_for(f"open ws://127.0.0.1:{port}", 60.0), viewer.text()
    return viewer, port


def _check_channels(client: FoxgloveClient, announced: dict[str, list[str]]) -> None:
    codec = default_codec()
    for channel in client.channels.values():
        types = announced.get(channel["topic"])
        assert types is not None, f"{channel['topic']} is advertised but no node announces it"
        assert channel["schemaName"] == codec.resolve(types[0])
        assert channel["schemaEncoding"] == "ros2msg" and channel["encoding"] == "cdr"
        assert channel["schema"] == codec.definition(types[0])


@pytest.mark.timeout(600)  # the sum of its deadlines, each generous for a loaded machine
def test_view_serves_a_running_sim_deployment_to_a_foxglove_client(
    procs: Callable[..., LoggedProcess], watcher: ZenohBus, router_endpoint: str, domain: str
) -> None:
    codec = default_codec()
    procs(*user_cmd("node", "robot", "--name", "viewed_arm", "-p", f"robot_id:={ROBOT}", "-p", "driver:=sim_franka",
                    "-p", "task:=peg_insertion", "-p", "realtime:=true"))  # fmt: skip
    direct = Direct(watcher, JOINTS)
    watcher.create_publisher(UNKNOWN, "nopkg/msg/Nope")  # announced with a type no installation defines
    assert wait_until(lambda: len(direct.seen()) >= 3, START_S, 0.1), "the sim robot published no joint states"

    viewer, port = _start_viewer(procs, router_endpoint, domain)
    client = FoxgloveClient(f"ws://127.0.0.1:{port}")
    try:
        announced = watcher.topic_names_and_types(1.0)
        served = {t for t, types in announced.items() if t != UNKNOWN and all(codec.has_type(x) for x in types)}
        assert JOINTS in served and f"/{ROBOT}/observation" in served
        assert client.pump_until(lambda: served <= {c["topic"] for c in client.channels.values()}, ARRIVE_S), (
            sorted(served - {c["topic"] for c in client.channels.values()}),
            viewer.text(),
        )
        assert client.server_info is not None and client.text_ops[0] == "serverInfo"
        _check_channels(client, announced)
        assert client.channel(UNKNOWN) is None

        joints = client.channel(JOINTS)
        assert joints is not None and joints["schemaName"] == "sensor_msgs/msg/JointState"
        before_ns = time.time_ns()
        sub = client.subscribe(joints["id"])
        assert client.pump_until(lambda: len(client.messages_of(sub)) >= 5, ARRIVE_S), viewer.text()
        after_ns = time.time_ns()
        # logged at arrival, on the wall clock: not the message's own stamp (a simulated arm's is simulation time)
        assert all(before_ns <= m.log_time_ns <= after_ns for m in client.messages_of(sub))
        got = [m.payload for m in client.messages_of(sub)]
        assert len(set(got) & direct.seen()) >= 3  # the bytes as published, not re-encoded
        names = codec.decode(direct.payloads[0], "sensor_msgs/msg/JointState").name
        for payload in got:
            msg = codec.decode(payload, "sensor_msgs/msg/JointState")
            assert list(msg.name) == list(names) and len(msg.position) == len(names)

        _check_late_topic(procs, client, viewer, watcher)
        assert viewer.text().count(f"not serving {UNKNOWN}") == 1, viewer.text()
        code, _ = viewer.stop(signal.SIGINT, 30.0)
        assert code == 0, viewer.text()
        with pytest.raises(ConnectionClosed):
            client.pump_until(lambda: False, 30.0)  # after what was queued for it, the client sees the close
    finally:
        client.close()


def _check_late_topic(
    procs: Callable[..., LoggedProcess], client: FoxgloveClient, viewer: LoggedProcess, watcher: ZenohBus
) -> None:
    """A talker started after the viewer: its topic is advertised once rediscovered and its messages arrive."""
    codec = default_codec()
    procs(*user_cmd("node", "talker", "--name", "late_talker", "-p", f"topic:={LATE}", "-p", "rate_hz:=5.0"))
    assert wait_until(lambda: LATE in watcher.topic_names_and_types(0.3), START_S), "the talker did not start"
    # announced now: the viewer looks every 0.5 s, so this deadline spans a hundred of its looks
    assert client.pump_until(lambda: client.channel(LATE) is not None, REDISCOVERED_S), viewer.text()
    late = client.channel(LATE)
    assert late is not None and late["schemaName"] == "std_msgs/msg/String"
    assert late["schema"] == codec.definition("std_msgs/msg/String")
    sub = client.subscribe(late["id"])
    arrived = client.pump_until(lambda: len(client.messages_of(sub)) >= 2, ARRIVE_S)
    assert arrived, (len(client.messages_of(sub)), viewer.text())
    texts = [codec.decode(m.payload, "std_msgs/msg/String").data for m in client.messages_of(sub)]
    assert all(t.startswith("Hello World: ") for t in texts), texts


def test_view_refuses_a_port_out_of_range_naming_it() -> None:
    proc = subprocess.run(view_cmd("--port", "70000"), capture_output=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "port" in proc.stderr.decode() and "70000" in proc.stderr.decode()


def test_view_says_so_when_its_port_is_taken(zenoh_env: dict[str, str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(view_cmd("--port", str(port)), env=zenoh_env, capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert f"cannot serve Foxglove on 127.0.0.1:{port}" in proc.stderr.decode()


def test_view_does_not_import_torch() -> None:
    code = "import sys, user.cli.view_cmd, user.viewer\nsys.exit(3 if 'torch' in sys.modules else 0)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr.decode()
