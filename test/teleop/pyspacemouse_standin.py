"""A stand-in for pyspacemouse 1.1.5 over easyhid 0.0.10, hidapi's hidraw build and the Linux hidraw driver,
installed as the `pyspacemouse` module (`install`), driven by a `SpaceMouseHardware` the test holds: what is
installed and plugged in, what the operator does with the puck, and a clock.

What it reproduces, each from the upstream code named at the place it is done:
- `open()` raises a bare `Exception` with the library's own text when hidapi is missing, when no supported
  device is connected, or when the device node cannot be opened (no permission); it never returns a falsy value
  for these (pyspacemouse.py 1.1.5 `open`, `list_devices`, `DeviceSpec.open`).
- each `read()` consumes at most one queued HID report and returns the state after it; with none queued it
  returns the same state object again, without waiting (`DeviceSpec.read` over easyhid `HIDDevice.read` in
  non-blocking mode, which `open` sets).
- the device sends a report every 1/`report_hz` s while the puck is off its rest position or a button is held,
  and one report when it comes back to rest; reports wait in the kernel's per-reader queue, which holds 63 and
  drops new ones when full (the source of PySpaceMouse issue #57's lag).
- after an unplug, every read raises easyhid's `HIDException`, also after a replug (the old handle stays dead);
  closing the dead handle works (hidapi linux/hid.c `hid_read_timeout`, `hid_close`).

The text an `open()` prints (`... found`) is not reproduced: it goes to stdout and means nothing to a caller.
"""

from __future__ import annotations

import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

# pyspacemouse.py 1.1.5 `list_devices`: Enumeration() raised AttributeError (easyhid dlopen'ed no hidapi)
HIDAPI_MISSING = "HID API is probably not installed. Look at https://spacemouse.kubaandrysek.cz for details."
# easyhid/easyhid.py 0.0.10, when cffi's dlopen(None) stands in for the missing libhidapi-hidraw.so.0
HIDAPI_SYMBOL = (
    "function/symbol 'hid_enumerate' not found in library '<None>': python3: undefined symbol: hid_enumerate"
)
# pyspacemouse.py 1.1.5 `open`: no supported device among the enumerated HID devices
NO_DEVICE = "No found any connected or supported devices."
# easyhid `HIDDevice.open` (hid_open_path returned NULL: open(2) of /dev/hidrawN failed), re-raised by
# pyspacemouse `DeviceSpec.open` as a bare Exception with the same text
OPEN_FAILED = "Failed to open device"
# easyhid `HIDDevice.read`: hid_read returned -1 (hidapi linux/hid.c: poll() reports POLLHUP/POLLERR after an unplug)
READ_FAILED = "Failed to read from HID device: -1"
# include/linux/hidraw.h HIDRAW_BUFFER_SIZE = 64; drivers/hid/hidraw.c `hidraw_report_event` keeps one slot free
# and skips a report when the ring is full
HIDRAW_QUEUE = 63
# AndunHH/spacemouse SpaceMouseWireless.md: a SpaceMouse Wireless sends a report every 16 ms while moved
WIRELESS_REPORT_HZ = 62.5

AXES = ("x", "y", "z", "roll", "pitch", "yaw")


class HIDException(Exception):  # noqa: N818  (easyhid's name)
    """easyhid/easyhid.py `HIDException` (pyspacemouse re-exports it with `from easyhid import ... HIDException`)."""


class SpaceNavigator(NamedTuple):
    """pyspacemouse.py 1.1.5 `SpaceNavigator`: the state after the last report; `t` when it was processed."""

    t: float
    x: float
    y: float
    z: float
    roll: float
    pitch: float
    yaw: float
    buttons: list[int]


class ManualClock:
    """A clock that moves only when told to (unit tests); the node test uses `time.monotonic`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SpaceMouseHardware:
    """The machine and the device: hidapi installed, plugged in, readable, and what the operator does."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, report_hz: float = WIRELESS_REPORT_HZ) -> None:
        self.clock = clock
        self.report_hz = report_hz
        self.hidapi_installed = True  # libhidapi-hidraw0 (easyhid 0.0.10 dlopens 'hidapi-hidraw')
        self.plugged = True
        self.readable = True  # the user may open /dev/hidrawN (udev rule)
        self.generation = 0  # counts unplugs: a handle opened before one is dead
        self.dropped = 0  # reports the full queue skipped
        self.opens = 0
        self.queue: deque[dict[str, Any]] = deque()
        self._puck: dict[str, Any] = {**dict.fromkeys(AXES, 0.0), "buttons": [0, 0]}
        self._next_report = float("inf")  # when the device sends its next periodic report
        self._lock = threading.RLock()

    # ---- what the operator and the test do ------------------------------------------------------------------

    def hold(self, **state: Any) -> None:
        """The operator moves the puck (axes in [-1, 1]) or holds buttons; the device reports at once, then at its
        rate for as long as the puck is off rest."""
        with self._lock:
            self._emit_due()
            self._puck.update(state)
            self._send()
            self._next_report = self.clock() + 1.0 / self.report_hz if self._moving() else float("inf")

    def release(self) -> None:
        """The operator lets go: one rest report, then the device is quiet."""
        self.hold(**dict.fromkeys(AXES, 0.0), buttons=[0, 0])

    def report(self, **fields: Any) -> None:
        """One report arrives now with these fields (what a device with any values could send)."""
        with self._lock:
            self._emit_due()
            self._puck.update(fields)
            self._send()

    def out_of_range(self) -> None:
        """A SpaceMouse Wireless whose puck leaves the receiver's range (or whose battery dies) mid-deflection: the
        receiver stays enumerated, so the hidraw node stays and reads find no report (hid_read returns 0), with no
        rest report first (AndunHH/spacemouse SpaceMouseWireless.md: the puck sends, the receiver relays)."""
        with self._lock:
            self._emit_due()
            self._next_report = float("inf")

    def unplug(self) -> None:
        with self._lock:
            self.plugged = False
            self.generation += 1
            self._next_report = float("inf")

    def replug(self) -> None:
        with self._lock:
            self.plugged = True

    def queued(self) -> int:
        with self._lock:
            self._emit_due()
            return len(self.queue)

    # ---- the device and the kernel ---------------------------------------------------------------------------

    def _moving(self) -> bool:
        return any(self._puck[a] != 0.0 for a in AXES) or any(self._puck["buttons"])

    def _send(self) -> None:
        if not self.plugged:
            return
        if len(self.queue) >= HIDRAW_QUEUE:
            self.dropped += 1  # drivers/hid/hidraw.c: a full ring skips the new report
            return
        self.queue.append({**self._puck, "buttons": list(self._puck["buttons"])})

    def _emit_due(self) -> None:
        """The periodic reports the device sent up to now."""
        now = self.clock()
        while self._next_report <= now:
            self._send()
            self._next_report += 1.0 / self.report_hz

    def take(self, generation: int) -> dict[str, Any] | None:
        """One report for a reader opened in `generation`, None when none is queued (hid_read returned 0);
        HIDException when the device went away since it was opened."""
        with self._lock:
            if not self.plugged or generation != self.generation:
                raise HIDException(READ_FAILED)
            self._emit_due()
            return self.queue.popleft() if self.queue else None


class StandinDevice:
    """pyspacemouse.py 1.1.5 `DeviceSpec` as `open()` returns it (read/close/connected)."""

    name = "SpaceMouse Wireless"

    def __init__(self, hardware: SpaceMouseHardware) -> None:
        self._hw = hardware
        self._generation = hardware.generation
        self.connected = True
        self.reads = 0  # read() calls (each consumes at most one report)
        # DeviceSpec.__init__: t = -1 and zeros until the first report is processed
        self._fields: dict[str, Any] = {**dict.fromkeys(AXES, 0.0), "buttons": [0, 0]}
        self.tuple_state = SpaceNavigator(t=-1, **self._fields)

    def read(self) -> SpaceNavigator | None:
        if not self.connected:
            return None  # DeviceSpec.read: "None if the device is not open"
        self.reads += 1
        report = self._hw.take(self._generation)  # easyhid HIDDevice.read: raises HIDException after an unplug
        if report:  # DeviceSpec.read: `if ret: self.process(ret)`, a new state tuple per report
            self._fields.update(report)
            self.tuple_state = SpaceNavigator(t=self._hw.clock(), **self._fields)
        return self.tuple_state

    def close(self) -> None:
        self.connected = False  # DeviceSpec.close: hid_close works on a dead handle too


def make_module(hardware: SpaceMouseHardware) -> types.ModuleType:
    """The `pyspacemouse` module as 1.1.5 has it: open/read/close at module level over the last opened device."""
    module = types.ModuleType("pyspacemouse")
    module.__version__ = "1.1.5"  # type: ignore[attr-defined]
    module.HIDException = HIDException  # type: ignore[attr-defined]
    module.SpaceNavigator = SpaceNavigator  # type: ignore[attr-defined]
    active: list[StandinDevice] = []

    def open_(*_args: Any, **_kwargs: Any) -> StandinDevice:
        hardware.opens += 1
        if not hardware.hidapi_installed:
            raise Exception(HIDAPI_MISSING) from AttributeError(HIDAPI_SYMBOL)
        if not hardware.plugged:
            raise Exception(NO_DEVICE)
        if not hardware.readable:
            raise Exception(OPEN_FAILED) from HIDException(OPEN_FAILED)
        with hardware._lock:
            hardware._emit_due()
            hardware.queue.clear()  # drivers/hid/hidraw.c hidraw_open: a new reader starts with an empty ring
        device = StandinDevice(hardware)
        active[:] = [device]
        return device

    def read() -> SpaceNavigator | None:
        return active[0].read() if active else None

    def close() -> None:
        if active:
            active[0].close()

    module.open = open_  # type: ignore[attr-defined]
    module.read = read  # type: ignore[attr-defined]
    module.close = close  # type: ignore[attr-defined]
    module.opened = active  # type: ignore[attr-defined]  # the stand-in's own: the devices open() returned
    return module


def install(monkeypatch: pytest.MonkeyPatch, hardware: SpaceMouseHardware) -> types.ModuleType:
    """Put the stand-in in `sys.modules` as `pyspacemouse` for the rest of the test."""
    module = make_module(hardware)
    monkeypatch.setitem(sys.modules, "pyspacemouse", module)
    return module
