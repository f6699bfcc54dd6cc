"""The `pedal` node on the Zenoh runtime (in-process buses through a real router): the keyboard source on a real
pseudo-terminal, presses stamped with a rosgraph_msgs/Clock topic's time, and the evdev source's settings
reaching a fake `evdev` module of python-evdev's interface (evdev and an input device are not available here)."""

from __future__ import annotations

import errno
import logging
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from test.conftest import wait_until
from user.bus.zenoh_bus import ZenohBus
from user.config.strict import ConfigError
from user.interfaces.stamps import from_time
from user.nodes.pedal import MODE_EPISODE_END, MODE_STEP, PedalNode
from user.runtime.node import Node

pytestmark = pytest.mark.timeout(60)


class Inbox:
    """The HumanReward messages published on a topic."""

    def __init__(self, bus: ZenohBus, topic: str) -> None:
        self.node = Node(bus)
        self.items: list[Any] = []
        self._lock = threading.Lock()
        self.node.create_subscription(topic, "user/msg/HumanReward", self._on)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self.items.append(msg)

    def count(self) -> int:
        with self._lock:
            return len(self.items)


@pytest.fixture
def terminal() -> Iterator[tuple[int, str]]:
    """A pseudo-terminal: (the master side to type into, the path of the terminal the node reads)."""
    master, slave = os.openpty()
    yield master, os.ttyname(slave)
    os.close(master)
    os.close(slave)


@pytest.fixture
def start(make_bus: Callable[..., ZenohBus]) -> Iterator[Callable[[dict[str, Any]], PedalNode]]:
    started: list[PedalNode] = []

    def make(params: dict[str, Any]) -> PedalNode:
        node = PedalNode(make_bus("pedal", params))
        started.append(node)
        return node

    yield make
    for node in started:
        node.destroy()


def subscribed(node: PedalNode) -> bool:
    """Wait until the node's HumanReward publisher reaches the test's inbox, so no press is lost to discovery."""
    return bool(node._pub.raw.wait_for_subscribers(10.0))  # type: ignore[attr-defined]


def keyboard(tty: str, topic: str, **more: Any) -> dict[str, Any]:
    return {"source": "keyboard", "tty_path": tty, "topic": topic, "robot_id": "arm", "poll_hz": 200.0, **more}


def test_keys_typed_in_a_terminal_become_human_rewards(
    make_bus: Callable[..., ZenohBus], start: Callable[..., PedalNode], terminal: tuple[int, str], topic: str
) -> None:
    inbox = Inbox(make_bus("inbox"), topic)
    master, tty = terminal
    node = start(keyboard(tty, topic, success_char="y", failure_char="n", step_char="enter"))
    assert subscribed(node)
    before = time.time_ns()
    os.write(master, b"nsy\r")  # 's' is not a key here (success is 'y'); Enter is the step key
    assert wait_until(lambda: inbox.count() == 3, 10.0), inbox.items
    failure, success, step = inbox.items
    assert (failure.mode, failure.reward, failure.success) == (MODE_EPISODE_END, 0.0, False)
    assert (success.mode, success.reward, success.success) == (MODE_EPISODE_END, 1.0, True)
    assert (step.mode, step.reward, step.success) == (MODE_STEP, 1.0, False)
    assert all(before <= from_time(m.header.stamp) <= time.time_ns() for m in inbox.items)  # the wall clock
    assert node.published == 3 and node.presses_without_clock == 0


class Clock:
    """Publishes rosgraph_msgs/Clock on a topic, as a simulated robot does."""

    def __init__(self, bus: ZenohBus, topic: str) -> None:
        self.node = Node(bus)
        self._pub = self.node.create_publisher(topic, "rosgraph_msgs/msg/Clock")
        self._time = self.node.codec.msg_class("builtin_interfaces/msg/Time")
        self._msg = self.node.codec.msg_class("rosgraph_msgs/msg/Clock")

    def publish(self, sec: int, nanosec: int) -> None:
        self._pub.publish(self._msg(clock=self._time(sec=sec, nanosec=nanosec)))

    def until_heard(self, node: PedalNode, sec: int, nanosec: int) -> bool:
        """Publish (sec, nanosec) until `node` holds it as its latest clock time."""
        expected = sec * 1_000_000_000 + nanosec

        def heard() -> bool:
            self.publish(sec, nanosec)
            return node.clock_ns == expected

        return wait_until(heard, 10.0, 0.05)


def test_presses_are_stamped_with_the_latest_clock_time(
    make_bus: Callable[..., ZenohBus], start: Callable[..., PedalNode], terminal: tuple[int, str], topic: str
) -> None:
    clock_topic = f"{topic}_clock"
    inbox = Inbox(make_bus("inbox"), topic)
    clock = Clock(make_bus("sim"), clock_topic)
    master, tty = terminal
    node = start(keyboard(tty, topic, clock_topic=clock_topic))
    assert subscribed(node)
    assert clock.until_heard(node, 7, 250_000_000)
    assert clock.until_heard(node, 12, 500_000_001)  # simulated time: far from the wall clock
    os.write(master, b"s")
    assert wait_until(lambda: inbox.count() == 1, 10.0)
    (press,) = inbox.items
    assert (press.header.stamp.sec, press.header.stamp.nanosec) == (12, 500_000_001)
    assert press.success and press.mode == MODE_EPISODE_END
    assert clock.until_heard(node, 0, 40)  # a restarted simulation starts again at 0: the latest time counts
    os.write(master, b" ")
    assert wait_until(lambda: inbox.count() == 2, 10.0)
    assert (inbox.items[1].header.stamp.sec, inbox.items[1].header.stamp.nanosec, inbox.items[1].mode) == (
        0,
        40,
        MODE_STEP,
    )


def test_a_press_before_any_clock_time_is_dropped_with_a_warning(
    make_bus: Callable[..., ZenohBus],
    start: Callable[..., PedalNode],
    terminal: tuple[int, str],
    topic: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock_topic = f"{topic}_clock"
    inbox = Inbox(make_bus("inbox"), topic)
    master, tty = terminal
    node = start(keyboard(tty, topic, clock_topic=clock_topic))
    with caplog.at_level(logging.WARNING):
        os.write(master, b"sx")  # 'x' is no key: not counted
        assert wait_until(lambda: node.presses_without_clock == 1, 10.0)
    assert any(clock_topic in r.getMessage() and "dropped" in r.getMessage() for r in caplog.records), caplog.text
    clock = Clock(make_bus("sim"), clock_topic)
    assert subscribed(node)
    assert clock.until_heard(node, 3, 0)
    os.write(master, b"f")
    assert wait_until(lambda: inbox.count() == 1, 10.0)
    assert inbox.items[0].header.stamp.sec == 3 and not inbox.items[0].success  # the first press never came
    assert node.published == 1 and node.presses_without_clock == 1


def test_a_keyboard_path_that_is_not_a_terminal_fails_at_start(
    start: Callable[..., PedalNode], tmp_path: Path, topic: str
) -> None:
    plain = tmp_path / "pedal.txt"
    plain.write_text("")
    with pytest.raises(ConfigError, match=f"{plain} is not a terminal"):
        start(keyboard(str(plain), topic))
    with pytest.raises(ConfigError, match="'ss' is no terminal key"):
        start(keyboard(str(plain), topic, step_char="ss"))


class _FakeInputDevice:
    busy = False
    opened: list[_FakeInputDevice] = []

    def __init__(self, path: str) -> None:
        self.path = path
        self.calls: list[str] = []
        self.opened.append(self)

    def grab(self) -> None:
        self.calls.append("grab")
        if self.busy:
            raise OSError(errno.EBUSY, "Device or resource busy")

    def ungrab(self) -> None:
        self.calls.append("ungrab")

    def read_one(self) -> None:
        return None

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def fake_evdev(monkeypatch: pytest.MonkeyPatch) -> type[_FakeInputDevice]:
    module = types.ModuleType("evdev")
    module.InputDevice = _FakeInputDevice  # type: ignore[attr-defined]
    module.ecodes = types.SimpleNamespace(EV_KEY=1, KEY={}, BTN={}, keys={})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evdev", module)
    monkeypatch.setattr(_FakeInputDevice, "opened", [])
    return _FakeInputDevice


@pytest.mark.parametrize(("grab", "calls"), [(None, ["grab", "ungrab", "close"]), (False, ["close"])])
def test_the_evdev_device_is_grabbed_unless_told_not_to(
    make_bus: Callable[..., ZenohBus], fake_evdev: type[_FakeInputDevice], grab: bool | None, calls: list[str]
) -> None:
    params: dict[str, Any] = {"source": "evdev", "device_path": "/dev/input/fake3"}
    if grab is not None:
        params["grab"] = grab
    node = PedalNode(make_bus("pedal", params))
    node.destroy()
    (device,) = fake_evdev.opened
    assert device.path == "/dev/input/fake3" and device.calls == calls


def test_an_evdev_device_held_elsewhere_fails_at_start(
    make_bus: Callable[..., ZenohBus], fake_evdev: type[_FakeInputDevice], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fake_evdev, "busy", True)
    with pytest.raises(ConfigError, match="/dev/input/fake4 is grabbed by another process"):
        PedalNode(make_bus("pedal", {"source": "evdev", "device_path": "/dev/input/fake4"}))


def test_missing_evdev_names_the_pedal_extra(
    make_bus: Callable[..., ZenohBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "evdev", None)
    with pytest.raises(ConfigError, match=r"pip install 'user\[pedal\]'"):
        PedalNode(make_bus("pedal", {"source": "evdev", "device_path": "/dev/input/event5"}))


def test_a_negative_clock_time_is_refused(
    make_bus: Callable[..., ZenohBus], start: Callable[..., PedalNode], terminal: tuple[int, str], topic: str
) -> None:
    clock_topic = f"{topic}_clock"
    clock = Clock(make_bus("sim"), clock_topic)
    node = start(keyboard(terminal[1], topic, clock_topic=clock_topic))
    assert clock.until_heard(node, 5, 0)

    def refused() -> bool:
        clock.publish(-2, 0)
        return node.refused.count("negative clock") > 0

    assert wait_until(refused, 10.0, 0.05)
    assert node.clock_ns == 5_000_000_000  # the last usable time stays
