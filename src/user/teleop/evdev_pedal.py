"""A USB foot pedal (any Linux input device) as a pedal source, read through evdev without blocking (evdev is
imported only when one is opened).

A press with an unusable timestamp (non-finite, negative, beyond int64 nanoseconds) gets the wall-clock time,
counted by cause in `refused` (logged once per cause, then rate-limited); a device that cannot be read at all
raises `DeviceError`, never another exception.
"""

from __future__ import annotations

import errno
import logging
import math
import time
from typing import Any

from user.interfaces.refusals import Refusals
from user.teleop.errors import DeviceError
from user.teleop.pedal import PedalPress

MAX_STAMP_NS = 2**63 - 1  # an int64 nanosecond stamp (the message field)

_log = logging.getLogger(__name__)


class EvdevPedal:
    """A Linux input device (USB foot pedal) read through evdev, without blocking.

    With `grab` (the default) the device is held exclusively (EVIOCGRAB) while it is open, so a pedal that is a
    keyboard to the system does not also type into the focused window; `close` releases it."""

    def __init__(self, path: str, grab: bool = True) -> None:
        try:
            import evdev
        except ImportError as exc:
            raise DeviceError(f"the foot pedal at {path} needs the evdev package: pip install 'user[pedal]'") from exc
        try:
            self._device: Any = evdev.InputDevice(path)
        except OSError as exc:
            raise DeviceError(f"cannot open the foot pedal at {path}: {exc.strerror or exc}") from exc
        self._ecodes: Any = evdev.ecodes
        self.path = path
        self.refused = Refusals(_log, level=logging.WARNING)
        self.grabbed = False
        if grab:
            self._grab()

    def _grab(self) -> None:
        """Hold the device exclusively; a device another process holds is a `DeviceError` naming the path."""
        try:
            self._device.grab()
        except OSError as exc:
            self._device.close()
            if exc.errno == errno.EBUSY:
                raise DeviceError(
                    f"the foot pedal at {self.path} is grabbed by another process (EBUSY): stop the process "
                    "that holds it (another pedal node, `evtest --grab`) and start again"
                ) from exc
            raise DeviceError(f"cannot grab the foot pedal at {self.path}: {exc.strerror or exc}") from exc
        self.grabbed = True

    def poll(self) -> list[PedalPress]:
        presses: list[PedalPress] = []
        while True:
            try:
                event = self._device.read_one()
            except OSError as exc:
                raise DeviceError(f"foot pedal at {self.path} failed: {exc.strerror or exc}") from exc
            if event is None:
                return presses
            if event.type == self._ecodes.EV_KEY and event.value == 1:  # key down
                presses.append(PedalPress(self._key(event.code), self._stamp_ns(event)))

    def _key(self, code: int) -> str:
        """The code's name as evtest prints it: `ecodes.keys` holds KEY_* and BTN_* names alike (pedals that report
        buttons send BTN_0.., BTN_LEFT), python-evdev's src/evdev/ecodes_runtime.py."""
        name = self._ecodes.keys.get(code)
        if isinstance(name, list | tuple):  # codes with several names: the first
            name = name[0] if name else None
        return str(name) if name else f"KEY_{code}"

    def _stamp_ns(self, event: Any) -> int:
        """The press's wall-clock stamp, or the time now when the device's is unusable (counted, logged once)."""
        try:
            seconds = float(event.timestamp())
        except (TypeError, ValueError, OverflowError) as exc:
            self.refused.refuse("unusable event timestamp", f"the stamp of a press on {self.path} ({exc})")
            return time.time_ns()
        stamp = seconds * 1e9
        if not math.isfinite(stamp) or not 0 <= stamp <= MAX_STAMP_NS:
            self.refused.refuse(
                "unusable event timestamp", f"the stamp {seconds!r} s of a press on {self.path}: the wall clock instead"
            )
            return time.time_ns()
        return int(stamp)

    def close(self) -> None:
        """Release the grab (a device already gone cannot be released: nothing to do) and close the device."""
        if self.grabbed:
            self.grabbed = False
            try:
                self._device.ungrab()
            except OSError as exc:
                _log.debug("releasing the foot pedal at %s: %s", self.path, exc.strerror or exc)
        self._device.close()
