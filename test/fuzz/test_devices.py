"""Human input devices: whatever a SpaceMouse or a foot pedal reports (odd axis values, NaN, odd key codes and
timestamps), the teleop device yields nothing or a finite action within [-1, 1], and the pedal yields presses
with a key name and an integer stamp or a `DeviceError`; never another exception, never a NaN command."""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from test.fuzz.strategies import CI
from test.teleop.pyspacemouse_standin import AXES, ManualClock, SpaceMouseHardware, install
from user.interfaces.refusals import Refusals
from user.teleop.errors import DeviceError
from user.teleop.evdev_pedal import MAX_STAMP_NS, EvdevPedal
from user.teleop.spacemouse import SpaceMouseTeleop

AXIS = st.floats(allow_nan=True, allow_infinity=True, width=32)


@dataclass
class _Event:
    type: int
    code: int
    value: int
    stamp: float

    def timestamp(self) -> float:
        return self.stamp


class _FakeDevice:
    def __init__(self, events: list[_Event]) -> None:
        self.events = list(events)

    def read_one(self) -> _Event | None:
        return self.events.pop(0) if self.events else None

    def close(self) -> None:
        pass


def _finite(axes: tuple[float, ...]) -> bool:
    return bool(np.all(np.isfinite(axes)))


@CI
@given(
    axes=st.lists(st.tuples(AXIS, AXIS, AXIS, AXIS, AXIS, AXIS), min_size=1, max_size=5),
    buttons=st.lists(st.lists(st.integers(0, 1), max_size=3), min_size=5, max_size=5),
    deadzone=st.floats(0.0, 1.0),
)
def test_teleop_commands_are_finite_and_bounded_or_nothing(
    monkeypatch: pytest.MonkeyPatch,
    axes: list[tuple[float, float, float, float, float, float]],
    buttons: list[list[int]],
    deadzone: float,
) -> None:
    hardware = SpaceMouseHardware(ManualClock())  # a fresh device per example; reports arrive one per read
    install(monkeypatch, hardware)
    device = SpaceMouseTeleop(deadzone)
    for values, pressed in zip(axes, buttons, strict=False):
        hardware.report(**dict(zip(AXES, values, strict=True)), buttons=pressed)
        action = device.read()
        if action is not None:
            assert action.shape == (7,) and action.dtype == np.float32
            assert np.all(np.isfinite(action)) and np.all(np.abs(action) <= 1.0)
        assert _finite(values) or action is None  # a reading with a NaN or inf axis is never a command
    non_finite = sum(not _finite(values) for values in axes)
    assert device.refused.count("non-finite axis value") == non_finite  # each one counted


EVENTS = st.builds(
    _Event,
    type=st.sampled_from([0, 1, 2, 4]),  # EV_SYN, EV_KEY, EV_REL, EV_MSC
    code=st.integers(-5, 1000),
    value=st.integers(-1, 3),
    stamp=st.floats(allow_nan=True, allow_infinity=True),
)


@CI
@given(events=st.lists(EVENTS, max_size=12))
def test_pedal_presses_have_a_key_and_an_integer_stamp(events: list[_Event]) -> None:
    pedal = EvdevPedal.__new__(EvdevPedal)  # the device cannot exist here: its event stream and codes are faked
    pedal._device = _FakeDevice(events)
    # python-evdev ecodes_runtime.py: `keys` names KEY_* and BTN_* codes (a code with several names: a list)
    pedal._ecodes = types.SimpleNamespace(EV_KEY=1, keys={30: "KEY_A", 48: "KEY_B", 46: ["KEY_C", "KEY_CAPS"]})
    pedal.path = "/dev/input/fake"
    pedal.refused = Refusals(logging.getLogger("test.pedal"))
    try:
        presses = pedal.poll()
    except DeviceError:
        return
    for press in presses:
        assert press.key and isinstance(press.stamp_ns, int) and 0 <= press.stamp_ns <= MAX_STAMP_NS
    downs = [e for e in events if e.type == 1 and e.value == 1]
    assert len(presses) <= len(downs)
    for press, event in zip(presses, downs, strict=True):  # a usable device stamp is kept as it was
        if np.isfinite(event.stamp) and 0 <= event.stamp * 1e9 <= MAX_STAMP_NS:
            assert press.stamp_ns == int(event.stamp * 1e9)
    unusable = sum(not (np.isfinite(e.stamp) and 0 <= e.stamp * 1e9 <= MAX_STAMP_NS) for e in downs)
    assert pedal.refused.count("unusable event timestamp") == unusable  # each one counted
