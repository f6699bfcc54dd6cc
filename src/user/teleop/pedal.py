"""What a foot pedal gives: `PedalPress`es, polled from a `PedalSource` without blocking; `ScriptedPedal` is the
scripted stand-in (presses at given times). The real sources are `evdev_pedal` (a USB foot pedal) and
`keyboard_pedal` (a terminal used as a pedal)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


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
