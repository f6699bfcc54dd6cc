"""The robot node's lifecycle: made, it has declared its topics but touched no hardware and runs no thread;
`configure` connects the robot; `activate` starts the control loop; `destroy` releases whichever ran. The runner
does all three (`user.runtime.node.started`), and destroys a node whose configure step failed."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError
from user.nodes.robot import RobotNode
from user.runtime import runner
from user.runtime.node import Node

PARAMS = {"task": "button_press", "control_rate_hz": 50.0, "max_steps": 5}


def test_a_made_robot_node_touches_no_hardware_until_configured_and_runs_nothing_until_activated(
    make_bus: Callable[..., ZenohBus],
) -> None:
    node = RobotNode(make_bus("robot", {"robot_id": f"arm_{uuid.uuid4().hex[:6]}", **PARAMS}))
    try:
        assert not node.robot.connected and node.view is None and node._thread.ident is None
        node.configure()
        assert node.robot.connected and node.view is not None and node._thread.ident is None
        node.activate()
        assert wait_until(lambda: node.loop.episode_id is not None, 20.0), node.failed
    finally:
        node.destroy()
    assert not node._thread.is_alive()


def test_a_made_but_never_started_robot_node_is_destroyed_cleanly(make_bus: Callable[..., ZenohBus]) -> None:
    node = RobotNode(make_bus("robot", {"robot_id": f"arm_{uuid.uuid4().hex[:6]}", **PARAMS}))
    node.destroy()  # no thread to join, no view: nothing raises
    assert not node.robot.connected


def test_activate_before_configure_is_refused(make_bus: Callable[..., ZenohBus]) -> None:
    node = RobotNode(make_bus("robot", {"robot_id": f"arm_{uuid.uuid4().hex[:6]}", **PARAMS}))
    try:
        with pytest.raises(RuntimeError, match="activate before configure"):
            node.activate()
    finally:
        node.destroy()


class _Steps(Node):
    """A node that records its lifecycle steps; its configure step fails when asked to."""

    calls: list[str] = []
    fail_configure = False

    def configure(self) -> None:
        self.calls.append("configure")
        if self.fail_configure:
            raise ConfigError("the device at /dev/none does not answer")

    def activate(self) -> None:
        self.calls.append("activate")

    def destroy(self) -> None:
        self.calls.append("destroy")


@pytest.mark.parametrize("fail", [False, True])
def test_the_runner_configures_activates_and_destroys_a_node_that_failed_to_configure(
    make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    monkeypatch.setattr(_Steps, "calls", [])
    monkeypatch.setattr(_Steps, "fail_configure", fail)
    monkeypatch.setattr(runner, "load_kind", lambda _kind: _Steps)
    stop: Any = SimpleNamespace(event=threading.Event())  # what `_make` takes of the runner's StopSignal
    if fail:
        with pytest.raises(ConfigError, match="does not answer"):
            runner._make("steps", make_bus("steps"), stop)
        assert _Steps.calls == ["configure", "destroy"]
    else:
        node = runner._make("steps", make_bus("steps"), stop)
        assert _Steps.calls == ["configure", "activate"] and node.request_stop == stop.event.set
