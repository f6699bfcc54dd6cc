"""Shared fixtures: a real Zenoh router per test session, helpers to run `user` in subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from user.bus.router import router_reachable
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ENV_ROUTER, ZenohSettings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.02) -> bool:
    """Poll `predicate` until it is true or the deadline passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


@pytest.fixture(scope="session")
def router_endpoint() -> Iterator[str]:
    """A real Zenoh router (`user router`) in its own process for the whole test session."""
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "user", "router", "--listen", endpoint],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        if not wait_until(lambda: router_reachable([endpoint], 0.5), 15.0, 0.1):
            proc.kill()
            raise RuntimeError(f"test router did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def zenoh_env(router_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment pointing this process and its children at the test router."""
    monkeypatch.setenv(ENV_ROUTER, router_endpoint)
    env = dict(os.environ)
    env[ENV_ROUTER] = router_endpoint
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def make_bus(router_endpoint: str) -> Iterator[Callable[..., ZenohBus]]:
    """Factory of ZenohBus instances connected to the test router; all closed at teardown."""
    buses: list[ZenohBus] = []

    def make(name: str = "test", parameters: dict[str, object] | None = None) -> ZenohBus:
        bus = ZenohBus(name, ZenohSettings(router=[router_endpoint]), parameters)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


@pytest.fixture
def topic() -> str:
    """A topic name no other test uses."""
    return f"/t_{uuid.uuid4().hex[:10]}"


def user_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "user", *args]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """Tests that run `user.cli.main.main` in-process install a console handler; take it away again."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
