"""A 3Dconnexion SpaceMouse as a teleoperation device, read through pyspacemouse 1.x (imported only when one is
opened; how the library is opened, drained and closed is in `spacemouse_hid`).

Each `read` takes every HID report queued since the last one (never one per call: that lags by up to a second,
PySpaceMouse issue #57): the motion is the newest state's, and a button pressed in any of them counts, so a click
shorter than a read period still moves the gripper.

A SpaceMouse that stops answering (unplugged, out of power) raises `DeviceError` on that read and on every read
until it is back: from then on each read (at most every `reopen_s`) tries to open it again, and the first one that
succeeds reads on as before. The error stays the same while it is away, so a caller that logs changes logs one
line; only a new reason (e.g. replugged but not accessible) changes it.

A SpaceMouse off rest sends a report every few milliseconds (16 ms for the wireless one, whose receiver stays
plugged in when the puck goes out of range or its battery dies: reads then just find no report). A deflected
state with no report for `silent_s` is therefore not a command: the read yields nothing (the robot holds, counted
in `refused`) until reports come again.

A reading with a non-finite (or non-numeric) axis value is never a command: the read yields nothing (the robot
holds), and the reading is counted by cause in `refused` (logged once per cause, then rate-limited).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from user.interfaces.refusals import Refusals
from user.teleop.device import F32
from user.teleop.errors import DeviceError, DeviceNotFoundError
from user.teleop.spacemouse_hid import close_device, import_library, open_device, read_reports

REOPEN_S = 1.0  # how often a SpaceMouse that went away is looked for again
SILENT_S = 0.25  # a deflected state without a report for this long is stale (about 15 reports missed)

_log = logging.getLogger(__name__)


class SpaceMouseTeleop:
    """3Dconnexion SpaceMouse through pyspacemouse: six axes -> motion; left button closes, right opens."""

    def __init__(
        self,
        deadzone: float = 0.05,
        reopen_s: float = REOPEN_S,
        clock: Callable[[], float] = time.monotonic,
        silent_s: float = SILENT_S,
    ) -> None:
        self._lib: Any = import_library()
        self._device: Any = open_device(self._lib)
        self._deadzone = deadzone
        self._reopen_s = reopen_s
        self._clock = clock
        self._gripper = 1.0
        self._last: Any = None  # the state the previous read ended with
        self._lost: DeviceError | None = None  # why the device is away (None while it answers)
        self._retry_at = 0.0
        self._silent_s = silent_s
        self._heard = clock()  # when the last report arrived
        self.refused = Refusals(_log, level=logging.WARNING)

    def read(self) -> F32 | None:
        states = self._reports()
        final = states[-1] if states else self._last
        if final is None:
            return None
        pressed = False
        for state in states or [final]:  # every report's buttons, in order: the last press sets the gripper
            pressed = self._buttons(state) or pressed
        motion = self._motion(final)
        if motion is None:
            return None  # hold: an unusable reading is never a command
        motion[np.abs(motion) < self._deadzone] = 0.0
        if not pressed and not np.any(motion):
            return None
        silent = self._clock() - self._heard
        if not states and silent > self._silent_s:
            self.refused.refuse("no report while deflected", f"the SpaceMouse sent nothing for {silent:.2f} s: held")
            return None
        action: F32 = np.clip(np.concatenate([motion, [self._gripper]]), -1.0, 1.0).astype(np.float32)
        return action

    def _reports(self) -> list[Any]:
        """The states of the reports queued now; `DeviceError` while the device is away."""
        if self._device is None:
            self._reopen()
        try:
            states = read_reports(self._device, self._last)
        except DeviceError as exc:
            self._lose(exc)
            raise
        if states:
            self._last, self._heard = states[-1], self._clock()
        return states

    def _lose(self, exc: DeviceError) -> None:
        device, self._device, self._last = self._device, None, None
        self._lost = exc
        self._retry_at = self._clock() + self._reopen_s
        try:
            close_device(device)
        except DeviceError as close_exc:
            _log.debug("%s", close_exc)  # the handle of a device that is gone: nothing more to release

    def _reopen(self) -> None:
        """Open the device again when a retry is due; until it opens, the error it went away with (or a new
        reason it cannot be opened other than its absence)."""
        lost = self._lost or DeviceError("the SpaceMouse is closed")
        if self._clock() < self._retry_at:
            raise lost
        self._retry_at = self._clock() + self._reopen_s
        try:
            self._device = open_device(self._lib)
        except DeviceNotFoundError as exc:
            raise lost from exc  # still away: the same line as before
        except DeviceError as exc:
            self._lost = exc  # back, but not usable: a new line saying why
            raise
        self._lost = None

    def _buttons(self, s: Any) -> bool:
        """Latch the gripper from a state's buttons; whether any button is pressed in it."""
        buttons = list(getattr(s, "buttons", []))
        if buttons and buttons[0]:
            self._gripper = -1.0
        elif len(buttons) > 1 and buttons[1]:
            self._gripper = 1.0
        return any(buttons)

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
        """Release the device (`DeviceError` if the library fails to); nothing to do when it is away."""
        device, self._device = self._device, None
        self._lost = self._lost or DeviceError("the SpaceMouse is closed")
        self._retry_at = float("inf")
        if device is not None:
            close_device(device)
