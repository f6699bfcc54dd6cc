"""The evdev pedal (a USB foot pedal): presses, and its exclusive grab, through a fake `evdev` module of the same
interface (evdev and a real input device are not available here)."""

from __future__ import annotations

import errno
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from user.teleop.errors import DeviceError
from user.teleop.evdev_pedal import EvdevPedal
from user.teleop.pedal import PedalPress


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
    # python-evdev's ecodes (src/evdev/ecodes_runtime.py): KEY holds only KEY_* names, BTN only BTN_* names (a
    # code with several names as a tuple, sorted), and `keys` both: what EV_KEY events carry.
    key = {30: "KEY_A", 48: "KEY_B"}
    btn = {256: ("BTN_0", "BTN_MISC"), 272: ("BTN_LEFT", "BTN_MOUSE")}
    module.ecodes = types.SimpleNamespace(EV_SYN=0, EV_KEY=1, KEY=key, BTN=btn, keys={**btn, **key})  # type: ignore[attr-defined]
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


def test_button_codes_get_their_btn_names(fake_evdev: Callable[[], _FakeInputDevice]) -> None:
    """Pedals that report buttons (BTN_0.., BTN_LEFT) instead of keys are named as evtest names them."""
    pedal = EvdevPedal("/dev/input/fake0")
    fake_evdev().events = [_Event(1, 256, 1, 10.0), _Event(1, 272, 1, 11.0)]
    try:
        assert [p.key for p in pedal.poll()] == ["BTN_0", "BTN_LEFT"]
    finally:
        pedal.close()


def test_missing_evdev_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "evdev", None)  # import evdev raises ImportError
    with pytest.raises(DeviceError, match=r"/dev/input/event7 needs the evdev package: pip install 'user\[pedal\]'"):
        EvdevPedal("/dev/input/event7")
