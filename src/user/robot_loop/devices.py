"""Human input devices (ROS-free): teleoperation devices and foot pedals, each with a scripted stand-in (a
terminal used as a pedal, the `keyboard` source, is in `pedal_sources`).

Hardware libraries are imported only when a real device is opened, with an error naming the pip package
(and the device path) when they are missing, so nodes that use the scripted devices need neither.

What a device reports is outside data: a SpaceMouse reading with a non-finite (or non-numeric) axis value is
never a command (the read yields nothing: the robot holds), and a pedal press with an unusable timestamp
(non-finite, negative, beyond int64 nanoseconds) gets the wall-clock time. Each such input is counted by
cause in the device's `refused` (`user.interfaces.refusals`: logged once per cause, then rate-limited); a
device that cannot be read at all raises `DeviceError`, never another exception.
"""

from __future__ import annotations

import errno
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from user.interfaces.refusals import Refusals

F32 = npt.NDArray[np.float32]
MAX_STAMP_NS = 2**63 - 1  # an int64 nanosecond stamp (the message field)

_log = logging.getLogger(__name__)


class DeviceError(RuntimeError):
    """A human input device could not be opened or read."""


class TeleopDevice(Protocol):
    """A device a human moves the robot with."""

    def read(self) -> F32 | None:
        """The operator's action now (normalised 7-D arm action), or None while they are idle (deadman)."""
        ...

    def close(self) -> None: ...


class ScriptedTeleop:
    """Acts with a fixed action from `start_s` to `start_s + duration_s` after creation, idle otherwise."""

    def __init__(
        self, action: Sequence[float], start_s: float, duration_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._action = np.asarray(action, dtype=np.float32)
        self._clock = clock
        self._start = clock() + start_s
        self._end = self._start + duration_s

    def read(self) -> F32 | None:
        return self._action.copy() if self._start <= self._clock() < self._end else None

    def close(self) -> None:
        pass


class SpaceMouseTeleop:
    """3Dconnexion SpaceMouse through pyspacemouse: six axes -> motion; left button closes, right opens."""

    def __init__(self, deadzone: float = 0.05) -> None:
        try:
            import pyspacemouse
        except ImportError as exc:
            raise DeviceError("the SpaceMouse needs the pyspacemouse package: pip install 'user[spacemouse]'") from exc
        self._lib: Any = pyspacemouse
        if not pyspacemouse.open():
            raise DeviceError("no SpaceMouse found (is it plugged in, and is /dev/hidraw* readable by this user?)")
        self._deadzone = deadzone
        self._gripper = 1.0
        self.refused = Refusals(_log, level=logging.WARNING)

    def read(self) -> F32 | None:
        s = self._lib.read()
        motion = self._motion(s)
        if motion is None:
            return None  # hold: an unusable reading is never a command
        motion[np.abs(motion) < self._deadzone] = 0.0
        buttons = list(getattr(s, "buttons", []))
        pressed = any(buttons)
        if buttons and buttons[0]:
            self._gripper = -1.0
        elif len(buttons) > 1 and buttons[1]:
            self._gripper = 1.0
        if not pressed and not np.any(motion):
            return None
        action: F32 = np.clip(np.concatenate([motion, [self._gripper]]), -1.0, 1.0).astype(np.float32)
        return action

    def _motion(self, s: Any) -> npt.NDArray[np.float64] | None:
        """The six axes as motion, or None (counted, logged once) when a value is not a finite number."""
        try:
            motion = np.array([s.y, -s.x, s.z, -s.roll, -s.pitch, -s.yaw], dtype=np.float64)
        except (TypeError, ValueError, AttributeError) as exc:
            self.refused.refuse("unreadable axis values", f"a SpaceMouse reading: {exc}")
            return None
        if not np.all(np.isfinite(motion)):
            self.refused.refuse("non-finite axis value", f"a SpaceMouse reading {motion.tolist()}: held")
            return None
        return motion

    def close(self) -> None:
        self._lib.close()


@dataclass(frozen=True)
class PedalPress:
    key: str  # evdev key name, e.g. "KEY_A"
    stamp_ns: int  # when it was pressed (wall clock)


class PedalSource(Protocol):
    """Key presses of a foot pedal (or any keyboard-like device)."""

    def poll(self) -> list[PedalPress]:
        """Presses since the last poll; never blocks."""
        ...

    def close(self) -> None: ...


class ScriptedPedal:
    """Presses `keys[i]` at `times_s[i]` seconds after creation."""

    def __init__(self, presses: Sequence[tuple[float, str]], clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        start = clock()
        self._pending = sorted((start + t, key) for t, key in presses)

    def poll(self) -> list[PedalPress]:
        now = self._clock()
        due = [(t, k) for t, k in self._pending if t <= now]
        self._pending = self._pending[len(due) :]
        return [PedalPress(k, time.time_ns()) for _, k in due]

    def close(self) -> None:
        pass


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
        name = self._ecodes.KEY.get(code)
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
