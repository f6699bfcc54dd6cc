"""The ros2-like verbs (`user topic info|bw|echo`, `user node list|info`, `user param`, `user service`) against a
deployment started by `user bringup` (its own router, talker and listener processes), as an operator runs them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from test.conftest import REPO, free_port, user_cmd, wait_until
from user.bus.zenoh_config import ENV_ROUTER

START_S = 60.0  # the deployment running, on a loaded 2-core machine
TOPIC = "/verbs_chatter"


@dataclass
class Deployment:
    env: dict[str, str]
    out: Path  # bringup's console

    def user(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            user_cmd(*args), env=self.env, capture_output=True, text=True, timeout=timeout_s, cwd=REPO
        )


def first_data(echoed: str) -> str:
    """The `data` field of the first message `user topic echo` printed."""
    return str(yaml.safe_load(echoed.split("---\n", maxsplit=1)[0])["data"])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("verbs")
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    config = tmp / "verbs.yaml"
    config.write_text(
        f"""name: verbs
router: {{endpoints: [{endpoint}], start: auto}}
log_dir: {tmp}/logs
nodes:
  - name: talker
    kind: talker
    params: {{topic: {TOPIC}, rate_hz: 20.0}}
  - name: listener
    kind: listener
    params: {{topic: {TOPIC}}}
"""
    )
    out = tmp / "bringup.out"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env[ENV_ROUTER] = endpoint
    with open(out, "wb") as f:
        proc = subprocess.Popen(
            user_cmd("bringup", str(config), "--run-dir", str(tmp / "run")), stdout=f, stderr=subprocess.STDOUT, env=env
        )
    try:

        def text() -> str:
            return out.read_text(errors="replace")

        assert wait_until(lambda: "listener is running" in text() and "talker is running" in text(), START_S), text()
        yield Deployment(env, out)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_bringup_prints_one_progress_line_per_node_as_it_becomes_ready(deployment: Deployment) -> None:
    lines = [line for line in deployment.out.read_text().splitlines() if " is running (" in line]
    found = [
        re.search(r"\[(\d)/(\d)\] (\w+) is running \([\d.]+ s after its start, [\d.]+ s into", line) for line in lines
    ]
    assert all(found), lines
    assert sorted(m.group(3) for m in found if m) == ["listener", "talker"]
    assert [m.group(1) for m in found if m] == ["1", "2"] and {m.group(2) for m in found if m} == {"2"}


def test_node_list_and_info(deployment: Deployment) -> None:
    listed = deployment.user("node", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["listener", "talker"]  # the tool's own session is not listed
    info = deployment.user("node", "info", "/talker")
    assert info.returncode == 0, info.stderr
    text = info.stdout
    publishers = text.split("  Publishers:\n")[1].split("  Service Servers:")[0]
    assert f"    {TOPIC}: std_msgs/msg/String" in publishers
    assert "    /talker/set_parameters: rcl_interfaces/srv/SetParameters" in text.split("  Service Servers:\n")[1]
    subscribers = deployment.user("node", "info", "listener").stdout.split("  Subscribers:\n")[1]
    assert subscribers.startswith(f"    {TOPIC}: std_msgs/msg/String")
    missing = deployment.user("node", "info", "nobody")
    assert missing.returncode == 1 and "node nobody is not running" in missing.stderr


def test_node_kind_still_runs_a_node(deployment: Deployment) -> None:
    described = deployment.user("node", "talker", "--describe")
    assert described.returncode == 0 and described.stdout.startswith("topic (str, default '/chatter')")
    extra = deployment.user("node", "talker", "surplus")
    assert extra.returncode != 0 and "surplus" in extra.stderr


def test_topic_info_names_the_nodes_and_with_v_the_qos(deployment: Deployment) -> None:
    info = deployment.user("topic", "info", TOPIC)
    assert info.returncode == 0, info.stderr
    assert info.stdout.splitlines() == [
        "Type: std_msgs/msg/String",
        "Publisher count: 1",
        "Subscription count: 1",
        "Publishers: talker",
        "Subscribers: listener",
    ]
    verbose = deployment.user("topic", "info", "-v", TOPIC).stdout
    assert "Node name: talker\nTopic type: std_msgs/msg/String\nEndpoint type: PUBLISHER\nQoS profile:\n" in verbose
    assert verbose.count("Reliability: RELIABLE") == 2
    assert deployment.user("topic", "info", "/no_such_topic").returncode != 0


def test_pub_with_best_effort_qos_is_announced_so(deployment: Deployment) -> None:
    topic = "/verbs_best_effort"
    pub = subprocess.Popen(
        user_cmd("topic", "pub", topic, "std_msgs/msg/String", "{data: x}", "--rate", "5",
                 "--qos-reliability", "best_effort", "--qos-depth", "3"),
        env=deployment.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def announced() -> str:
            return deployment.user("topic", "info", "-v", topic).stdout

        assert wait_until(lambda: "Reliability: BEST_EFFORT" in announced(), 30.0, 0.2), announced()
        assert "History (Depth): KEEP_LAST (3)" in announced()
        echo = deployment.user("topic", "echo", topic, "--once", "--timeout", "30", "--qos-reliability", "best_effort")
        assert echo.returncode == 0 and echo.stdout == "data: x\n---\n", echo.stderr
    finally:
        pub.terminate()
        pub.wait(10)


def test_topic_bw_measures_the_talkers_bytes(deployment: Deployment) -> None:
    bw = deployment.user("topic", "bw", TOPIC, "--count", "3")
    assert bw.returncode == 0, bw.stderr
    reports = re.findall(r"^([\d.]+) (B|KB)/s from (\d+) messages$", bw.stdout, re.MULTILINE)
    assert reports, bw.stdout
    sizes = re.findall(r"Message size mean: (\d+) B min: (\d+) B max: (\d+) B", bw.stdout)
    # 'Hello World: N' as CDR: 4 header + 4 length + text + NUL, padded: 24 to 28 bytes for N < 10^6
    assert sizes and all(20 <= int(size) <= 32 for row in sizes for size in row), bw.stdout
    rate, unit, _ = reports[-1]
    assert unit == "B" and float(rate) > 0


def test_echo_without_type_says_it_waits_and_gives_up_at_its_timeout(deployment: Deployment) -> None:
    echo = deployment.user("topic", "echo", "/verbs_silent", "--timeout", "1")
    assert echo.returncode == 2
    lines = echo.stderr.splitlines()
    assert lines[0].startswith("waiting for a publisher of /verbs_silent to announce its type (pass TYPE to skip)")
    assert "cannot tell the type of /verbs_silent after 1 s" in echo.stderr
    announced = deployment.user("topic", "echo", TOPIC, "--once", "--timeout", "30")  # the talker's type found
    assert announced.returncode == 0, announced.stderr
    assert first_data(announced.stdout).startswith("Hello World: ") and "waiting" not in announced.stderr


def test_param_list_get_set_and_a_refused_change(deployment: Deployment) -> None:
    listed = deployment.user("param", "list", "talker")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["topic", "rate_hz", "text"]
    got = deployment.user("param", "get", "talker", "rate_hz")
    assert got.returncode == 0 and got.stdout.strip() == "20.0", got.stderr

    changed = deployment.user("param", "set", "talker", "text", "Changed")
    assert changed.returncode == 0 and "Set parameter successful" in changed.stdout, changed.stderr
    assert deployment.user("param", "get", "talker", "text").stdout.strip() == "Changed"
    echo = deployment.user("topic", "echo", TOPIC, "--once", "--timeout", "30")
    assert first_data(echo.stdout).startswith("Changed: "), echo.stdout  # the running talker took it

    refused = deployment.user("param", "set", "talker", "topic", "/elsewhere")
    assert refused.returncode == 1
    assert "topic is read-only while the node runs" in refused.stdout
    out_of_range = deployment.user("param", "set", "talker", "rate_hz", "-3.0")
    assert out_of_range.returncode == 1 and "rate_hz" in out_of_range.stdout
    assert deployment.user("param", "get", "talker", "rate_hz").stdout.strip() == "20.0"  # nothing applied
    unknown = deployment.user("param", "get", "talker", "no_such")
    assert unknown.returncode == 1 and "no parameter no_such" in unknown.stderr


def test_service_list_and_call(deployment: Deployment) -> None:
    listed = deployment.user("service", "list", "-t")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    for node in ("listener", "talker"):
        for verb, srv in (("get", "GetParameters"), ("list", "ListParameters"), ("set", "SetParameters")):
            assert f"/{node}/{verb}_parameters [rcl_interfaces/srv/{srv}]" in lines
    called = deployment.user(
        "service", "call", "/listener/get_parameters", "rcl_interfaces/srv/GetParameters", "{names: [topic]}"
    )
    assert called.returncode == 0, called.stderr
    response = yaml.safe_load(called.stdout.split("response:\n", 1)[1])
    assert [(v["type"], v["string_value"]) for v in response["values"]] == [(4, TOPIC)]
    late = deployment.user("service", "call", "/nobody/get_parameters", "rcl_interfaces/srv/GetParameters",
                           "{names: [x]}", "--timeout", "1")  # fmt: skip
    assert late.returncode == 2 and "no server for service /nobody/get_parameters" in late.stderr
    bad = deployment.user("service", "call", "/talker/get_parameters", "rcl_interfaces/srv/GetParameters", "{nme: x}")
    assert bad.returncode == 2 and "nme" in bad.stderr
