"""`user topic` against plain Zenoh sessions that run no project code."""

from __future__ import annotations

import struct
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
import yaml
import zenoh

from test.conftest import REPO, free_port, user_cmd, wait_until
from user.bus.zenoh_config import ZenohSettings, session_config


def cdr_string(text: str) -> bytes:
    """std_msgs/String as CDR, built by hand: header, uint32 length incl. NUL, bytes, NUL."""
    data = text.encode() + b"\x00"
    return b"\x00\x01\x00\x00" + struct.pack("<I", len(data)) + data


@pytest.fixture
def plain_session(router_endpoint: str) -> Iterator[zenoh.Session]:
    session = zenoh.open(session_config(ZenohSettings(router=[router_endpoint])))
    yield session
    session.close()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated


def test_echo_prints_a_string_from_a_plain_zenoh_publisher(
    plain_session: zenoh.Session, zenoh_env: dict[str, str], topic: str
) -> None:
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(0.05):
            plain_session.put(topic.lstrip("/"), cdr_string("hello from plain zenoh"))

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        proc = subprocess.run(
            user_cmd("topic", "echo", topic, "std_msgs/msg/String", "--once", "--timeout", "20"),
            env=zenoh_env,
            capture_output=True,
            timeout=60,
            cwd=REPO,
        )
    finally:
        stop.set()
        thread.join(5)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == "data: hello from plain zenoh\n---\n"


def test_pub_is_seen_by_a_plain_zenoh_subscriber(
    plain_session: zenoh.Session, zenoh_env: dict[str, str], topic: str
) -> None:
    got: list[bytes] = []
    sub = plain_session.declare_subscriber(topic.lstrip("/"), lambda s: got.append(s.payload.to_bytes()))
    proc = subprocess.run(
        user_cmd("topic", "pub", "--once", topic, "std_msgs/msg/String", "{data: hi there}"),
        env=zenoh_env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert wait_until(lambda: len(got) == 1, 5.0)
    assert got == [cdr_string("hi there")]
    sub.undeclare()  # type: ignore[no-untyped-call]  # zenoh's stubs leave it unannotated


def test_pub_echo_list_and_hz_between_user_tools(zenoh_env: dict[str, str], topic: str) -> None:
    pub = subprocess.Popen(
        user_cmd(
            "topic",
            "pub",
            "--rate",
            "20",
            topic,
            "sensor_msgs/JointState",
            "{name: [j1, j2], position: [0.5, -1.25]}",
        ),
        env=zenoh_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        echo = subprocess.run(
            user_cmd("topic", "echo", topic, "--count", "2", "--timeout", "30"),
            env=zenoh_env,
            capture_output=True,
            timeout=60,
        )
        assert echo.returncode == 0, echo.stderr.decode()
        docs = [d for d in yaml.safe_load_all(echo.stdout.decode()) if d]
        assert len(docs) == 2
        assert docs[0]["name"] == ["j1", "j2"] and docs[0]["position"] == [0.5, -1.25]

        listed = subprocess.run(user_cmd("topic", "list", "-t"), env=zenoh_env, capture_output=True, timeout=60)
        assert f"{topic} [sensor_msgs/msg/JointState]" in listed.stdout.decode()

        hz = subprocess.run(
            user_cmd("topic", "hz", topic, "--count", "3"), env=zenoh_env, capture_output=True, timeout=60
        )
        rates = [
            float(line.split(":")[1]) for line in hz.stdout.decode().splitlines() if line.startswith("average rate")
        ]
        assert rates and 10.0 < rates[-1] < 30.0, hz.stdout.decode()  # 20 Hz, loosely: shared machine
    finally:
        pub.terminate()
        pub.wait(10)


def test_pub_rejects_bad_yaml_fields(zenoh_env: dict[str, str], topic: str) -> None:
    proc = subprocess.run(
        user_cmd("topic", "pub", "--once", topic, "std_msgs/msg/String", "{dta: x}"),
        env=zenoh_env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"has no field 'dta'" in proc.stderr


def test_echo_without_type_or_publisher_explains(
    zenoh_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, topic: str
) -> None:
    from user.cli import topic_cmd

    monkeypatch.setattr(topic_cmd, "TYPE_DISCOVERY_TIMEOUT_S", 0.5)
    code = topic_cmd.run_echo(topic_cmd_args(topic))
    assert code == 2


def topic_cmd_args(topic: str):  # type: ignore[no-untyped-def]
    import argparse

    return argparse.Namespace(topic=topic, type=None, once=True, count=None, timeout=1.0, no_arr=False)


def test_topic_tools_without_router_fail_clearly(zenoh_env: dict[str, str]) -> None:
    env = dict(zenoh_env, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{free_port()}")
    start = time.monotonic()
    proc = subprocess.run(user_cmd("topic", "list"), env=env, capture_output=True, timeout=30)
    assert proc.returncode == 2
    assert b"no Zenoh router reachable" in proc.stderr
    assert time.monotonic() - start < 15
