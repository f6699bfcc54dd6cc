"""Pedal sources: the `keyboard` source on a real pseudo-terminal (characters written into its master side), and
the evdev pedal's exclusive grab through a fake `evdev` module of the same interface (evdev and a real input
device are not available here)."""

from __future__ import annotations

import errno
import os
import sys
import termios
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from test.conftest import wait_until
from user.robot_loop.devices import DeviceError, EvdevPedal, PedalPress
from user.robot_loop.pedal_sources import KeyboardPedal, parse_char

KEYS = [("s", "KEY_A"), ("f", "KEY_C"), ("space", "KEY_B")]


@dataclass
class Pty:
    master: int
    slave: int
    path: str

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def lflag(self) -> int:
        return int(termios.tcgetattr(self.slave)[3])


@pytest.fixture
def pty() -> Iterator[Pty]:
    master, slave = os.openpty()
    terminal = Pty(master, slave, os.ttyname(slave))
    yield terminal
    for fd in (terminal.master, terminal.slave):
        if fd >= 0:
            os.close(fd)


def collect(source: KeyboardPedal, count: int) -> list[PedalPress]:
    """Poll until `count` presses came (or the deadline passed)."""
    presses: list[PedalPress] = []

    def enough() -> bool:
        presses.extend(source.poll())
        return len(presses) >= count

    wait_until(enough, 5.0)
    return presses


def test_typed_characters_are_reported_as_their_keys_without_enter(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, KEYS)
    try:
        assert source.poll() == []  # nothing typed: returns at once with nothing
        before = time.time_ns()
        pty.type("sx f")  # no Enter: cbreak mode hands over each character as it is typed
        presses = collect(source, 3)
        assert [p.key for p in presses] == ["KEY_A", "KEY_B", "KEY_C"]  # 'x' is no key
        assert all(before <= p.stamp_ns <= time.time_ns() for p in presses)
    finally:
        source.close()


def test_configured_characters_choose_the_keys(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, [("enter", "KEY_A"), ("1", "KEY_C"), ("é", "KEY_B")])
    try:
        pty.type("s1é\r")  # the terminal turns Enter's \r into \n; é arrives as two bytes
        assert [p.key for p in collect(source, 3)] == ["KEY_C", "KEY_B", "KEY_A"]
    finally:
        source.close()


def test_the_terminal_mode_is_cbreak_while_open_and_restored_on_close(pty: Pty) -> None:
    original = pty.lflag()
    assert original & termios.ICANON and original & termios.ECHO
    source = KeyboardPedal(pty.path, KEYS)
    assert not pty.lflag() & (termios.ICANON | termios.ECHO)
    assert pty.lflag() & termios.ISIG  # Ctrl-C still interrupts the node
    source.close()
    assert pty.lflag() == original
    source.close()  # twice is harmless
    with pytest.raises(DeviceError, match="closed"):
        source.poll()


def test_the_mode_is_restored_after_a_read_failed(pty: Pty, monkeypatch: pytest.MonkeyPatch) -> None:
    original = pty.lflag()
    source = KeyboardPedal(pty.path, KEYS)

    def broken_read(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "read", broken_read)
        with pytest.raises(DeviceError, match=f"{pty.path} failed: Input/output error"):
            source.poll()
    source.close()
    assert pty.lflag() == original


def test_a_hung_up_terminal_is_a_device_error(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, KEYS)
    try:
        os.close(pty.master)
        pty.master = -1
        with pytest.raises(DeviceError, match=pty.path):
            source.poll()
    finally:
        source.close()


def test_a_path_that_is_not_a_terminal_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "not_a_tty"
    plain.write_text("s")
    with pytest.raises(DeviceError, match=f"{plain} is not a terminal"):
        KeyboardPedal(str(plain), KEYS)
    with pytest.raises(DeviceError, match=f"cannot open the terminal {tmp_path}/missing"):
        KeyboardPedal(str(tmp_path / "missing"), KEYS)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([("s", "KEY_A"), ("ab", "KEY_B")], "'ab' is no terminal key"),
        ([("s", "KEY_A"), ("", "KEY_B")], "'' is no terminal key"),
        ([("s", "KEY_A"), (" ", "KEY_B")], "' ' is no terminal key"),  # written `space`
        ([("space", "KEY_A"), ("s", "KEY_C"), ("s", "KEY_B")], "'s' is given for both KEY_C and KEY_B"),
    ],
)
def test_bad_key_characters_are_refused_before_the_terminal_is_touched(
    pty: Pty, keys: list[tuple[str, str]], message: str
) -> None:
    original = pty.lflag()
    with pytest.raises(DeviceError, match=message):
        KeyboardPedal(pty.path, keys)
    assert pty.lflag() == original


def test_named_characters() -> None:
    assert [parse_char(n) for n in ("space", "enter", "tab", "q", "+")] == [" ", "\n", "\t", "q", "+"]


# --- evdev, faked behind python-evdev's interface ---


@dataclass
class _Event:
    type: int
    code: int
    value: int  # 1 down, 0 up, 2 autorepeat
    sec: float

    def timestamp(self) -> float:
        return self.sec


class _FakeInputDevice:
    busy = False  # another process holds the device

    def __init__(self, path: str) -> None:
        self.path = path
        self.calls: list[str] = []
        self.events: list[_Event] = []
        opened.append(self)

    def grab(self) -> None:
        self.calls.append("grab")
        if self.busy:
            raise OSError(errno.EBUSY, "Device or resource busy")

    def ungrab(self) -> None:
        self.calls.append("ungrab")

    def read_one(self) -> _Event | None:
        return self.events.pop(0) if self.events else None

    def close(self) -> None:
        self.calls.append("close")


opened: list[_FakeInputDevice] = []


@pytest.fixture
def fake_evdev(monkeypatch: pytest.MonkeyPatch) -> Callable[[], _FakeInputDevice]:
    module = types.ModuleType("evdev")
    module.InputDevice = _FakeInputDevice  # type: ignore[attr-defined]
    module.ecodes = types.SimpleNamespace(EV_SYN=0, EV_KEY=1, KEY={30: "KEY_A", 48: "KEY_B"})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "evdev", module)
    monkeypatch.setattr(_FakeInputDevice, "busy", False)
    opened.clear()
    return lambda: opened[-1]


def test_the_device_is_grabbed_while_open_and_released_on_close(fake_evdev: Callable[[], _FakeInputDevice]) -> None:
    pedal = EvdevPedal("/dev/input/fake0")
    device = fake_evdev()
    assert device.path == "/dev/input/fake0" and device.calls == ["grab"] and pedal.grabbed
    pedal.close()
    assert device.calls == ["grab", "ungrab", "close"]


def test_without_grab_the_device_is_shared(fake_evdev: Callable[[], _FakeInputDevice]) -> None:
    pedal = EvdevPedal("/dev/input/fake0", grab=False)
    pedal.close()
    assert fake_evdev().calls == ["close"]


def test_a_device_grabbed_elsewhere_is_a_clear_error(
    fake_evdev: Callable[[], _FakeInputDevice], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_FakeInputDevice, "busy", True)
    with pytest.raises(DeviceError, match="/dev/input/fake1 is grabbed by another process"):
        EvdevPedal("/dev/input/fake1")
    assert fake_evdev().calls == ["grab", "close"]  # not left open


def test_only_key_downs_are_presses(fake_evdev: Callable[[], _FakeInputDevice]) -> None:
    pedal = EvdevPedal("/dev/input/fake0")
    fake_evdev().events = [
        _Event(1, 30, 1, 100.5),  # KEY_A down
        _Event(0, 0, 0, 100.5),  # sync
        _Event(1, 30, 2, 100.7),  # autorepeat
        _Event(1, 30, 0, 100.9),  # up
        _Event(1, 48, 1, 101.25),  # KEY_B down
        _Event(1, 99, 1, 102.0),  # a code without a name
    ]
    try:
        assert pedal.poll() == [
            PedalPress("KEY_A", 100_500_000_000),
            PedalPress("KEY_B", 101_250_000_000),
            PedalPress("KEY_99", 102_000_000_000),
        ]
        assert pedal.poll() == []
    finally:
        pedal.close()


def test_missing_evdev_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "evdev", None)  # import evdev raises ImportError
    with pytest.raises(DeviceError, match=r"/dev/input/event7 needs the evdev package: pip install 'user\[pedal\]'"):
        EvdevPedal("/dev/input/event7")
