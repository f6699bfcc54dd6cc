"""A 3Dconnexion SpaceMouse as a teleoperation device, read through pyspacemouse (imported only when one is opened).

A reading with a non-finite (or non-numeric) axis value is never a command: the read yields nothing (the robot
holds), and the reading is counted by cause in `refused` (logged once per cause, then rate-limited).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from user.interfaces.refusals import Refusals
from user.teleop.device import F32
from user.teleop.errors import DeviceError

_log = logging.getLogger(__name__)


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
