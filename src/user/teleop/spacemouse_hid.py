"""The pyspacemouse 1.x device as the library really behaves, every library failure a one-line `DeviceError`.

pyspacemouse 1.1.5 (over easyhid 0.0.10 and hidapi's hidraw build, libhidapi-hidraw.so.0) opens with a bare
`Exception` instead of a falsy return when hidapi is missing, no supported device is plugged in, or the device
node cannot be opened; a read after an unplug raises easyhid's `HIDException`. Each becomes a `DeviceError`
whose one line says what to do (`open_device`, `read_reports`, `close_device`).

A read consumes one queued HID report and returns the state after it, or the same state object again when none
is queued (the device is opened non-blocking). The kernel keeps up to 63 reports per reader (Linux hidraw), and
the device sends one every ~16 ms while the puck is moved, so one read per 50 Hz tick falls behind by up to a
second (PySpaceMouse issue #57). `read_reports` therefore reads until no new report came, bounded by
`MAX_REPORTS_PER_READ`, more than the kernel ever holds.
"""

from __future__ import annotations

import logging
from typing import Any

from user.teleop.errors import DeviceError, DeviceNotFoundError

MAX_REPORTS_PER_READ = 128  # > the 63 reports Linux hidraw queues per reader: one read empties a full queue

INSTALL_HIDAPI = "sudo apt install libhidapi-hidraw0 (the hidapi build easyhid loads), then start again"
PLUG_IN = (
    "plug it in (or its wireless receiver) and check that `lsusb` lists 3Dconnexion (vendor 256f or 046d), "
    "then start again"
)
PERMISSION = (
    "install the udev rule of docs/spacemouse.md, make sure your user is in the plugdev group "
    "(log in again after adding it), then unplug and replug it"
)

# what pyspacemouse 1.x's open() raises (the start of its text) -> our one line
_OPEN_FAILURES = (
    (
        "HID API is probably not installed",
        f"cannot open the SpaceMouse: the hidapi library is missing: {INSTALL_HIDAPI}",
    ),
    ("No found any connected or supported devices", f"no SpaceMouse found: {PLUG_IN}"),  # 1.1.3 .. 1.1.5
    ("No device connected/supported", f"no SpaceMouse found: {PLUG_IN}"),  # 1.1.0 .. 1.1.2
    (
        "Failed to open device",
        f"a SpaceMouse is plugged in but cannot be opened (no access to /dev/hidraw*): {PERMISSION}",
    ),
)

_log = logging.getLogger(__name__)


def import_library() -> Any:
    """The pyspacemouse module, or a `DeviceError` naming the package."""
    try:
        import pyspacemouse
    except ImportError as exc:
        raise DeviceError("the SpaceMouse needs the pyspacemouse package: pip install 'user[spacemouse]'") from exc
    except Exception as exc:  # easyhid runs cffi's dlopen at import
        raise DeviceError(f"cannot load pyspacemouse ({type(exc).__name__}: {exc}): {INSTALL_HIDAPI}") from exc
    return pyspacemouse


def open_failure(exc: Exception) -> str:
    """The one line that says what to do about an exception of pyspacemouse's open()."""
    text = str(exc)
    for start, line in _OPEN_FAILURES:
        if text.startswith(start):
            return line
    return f"cannot open the SpaceMouse ({type(exc).__name__}: {text}): see docs/spacemouse.md, Troubleshooting"


def _open_error(exc: Exception) -> DeviceError:
    line = open_failure(exc)
    return DeviceNotFoundError(line) if line.startswith("no SpaceMouse found") else DeviceError(line)


def open_device(lib: Any) -> Any:
    """Open the first supported SpaceMouse; the device object pyspacemouse returns (read/close)."""
    try:
        device = lib.open()
    except Exception as exc:
        raise _open_error(exc) from exc
    if not device:  # 1.x returns None when it was told a device name it did not find
        raise DeviceNotFoundError(f"no SpaceMouse found: {PLUG_IN}")
    return device


def read_reports(device: Any, last: Any, max_reports: int = MAX_REPORTS_PER_READ) -> list[Any]:
    """The states after each report queued now, oldest first; empty when none came since `last` (the state the
    previous call ended with, or None). A read consumed a report when it returns another state object (1.x builds
    one per report, `DeviceSpec.process`) or the same object with another time stamp `t`."""
    states: list[Any] = []
    last_t = getattr(last, "t", None)
    for _ in range(max_reports):
        try:
            state = device.read()
        except Exception as exc:
            raise DeviceError(
                f"the SpaceMouse stopped answering ({type(exc).__name__}: {exc}): it was unplugged or lost power; "
                "plug it back in and it is reopened"
            ) from exc
        t = getattr(state, "t", None)
        if state is None or (state is last and t == last_t):
            return states
        states.append(state)
        last, last_t = state, t
    _log.debug("read %d SpaceMouse reports in one go: more may be queued", max_reports)
    return states


def close_device(device: Any) -> None:
    try:
        device.close()
    except Exception as exc:
        raise DeviceError(f"closing the SpaceMouse failed ({type(exc).__name__}: {exc})") from exc
