"""What a teleoperation device is: `TeleopDevice` gives the operator's arm action, or None while they are idle;
`ScriptedTeleop` is its scripted stand-in (a fixed action over a time window)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


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
