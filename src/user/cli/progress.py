"""Progress of a long command on stderr: on a terminal a bar redrawn in place (count, rate, ETA), otherwise a plain
line every few seconds (logs and pipes stay readable). Library code never imports this: it takes a callback
`(what, done, total)` and `Phases` is one."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 24
REDRAW_S = 0.1  # on a terminal: the shortest time between two redraws
LINE_EVERY_S = 5.0  # not on a terminal: one line this often


def duration_text(seconds: float) -> str:
    """'0:07', '12:03', '1:02:03'."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """How far one step (`label`) is: `update(done, total)` as it goes, `close()` at its end."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        unit: str = "",
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        line_every_s: float = LINE_EVERY_S,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = f" {unit}" if unit else ""
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.clock = clock
        self.every_s = REDRAW_S if self.tty else line_every_s
        self.start = clock()
        self.done = 0
        self._shown_at = self.start
        self._closed = False

    def rate(self) -> float:
        elapsed = self.clock() - self.start
        return self.done / elapsed if elapsed > 0 else 0.0

    def text(self) -> str:
        """'LABEL [#####-----] 120/1000 items 35.2/s ETA 0:25' (no bar, no ETA without a total)."""
        rate = self.rate()
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        parts = [self.label]
        if self.total:
            filled = min(BAR_WIDTH, int(BAR_WIDTH * self.done / self.total))
            parts.append(f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}]")
        parts.append(f"{count}{self.unit}")
        parts.append(f"{rate:.1f}/s")
        if self.total and rate > 0:
            parts.append(f"ETA {duration_text(max(0, self.total - self.done) / rate)}")
        return " ".join(parts)

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        now = self.clock()
        if now - self._shown_at >= self.every_s:
            self._shown_at = now
            self._show()

    def _show(self) -> None:
        if self.tty:
            self.stream.write(f"\r{self.text()}\x1b[K")
        else:
            self.stream.write(self.text() + "\n")
        self.stream.flush()

    def close(self) -> None:
        """The step is over: the final count, rate and time it took, on a line of its own."""
        if self._closed:
            return
        self._closed = True
        elapsed = self.clock() - self.start
        line = f"{self.label}: {self.done}{self.unit} in {duration_text(elapsed)} ({self.rate():.1f}/s)"
        self.stream.write(f"\r{line}\x1b[K\n" if self.tty else line + "\n")
        self.stream.flush()


class Phases:
    """A progress callback `(what, done, total)` for library code: each new `what` closes the step before it and
    shows itself as a `Progress`. Use as a context manager: a step cut short by an error gets no summary line."""

    def __init__(
        self,
        unit: str = "",
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        line_every_s: float = LINE_EVERY_S,
    ) -> None:
        self.unit = unit
        self.stream = stream
        self.clock = clock
        self.line_every_s = line_every_s
        self.current: Progress | None = None

    def __call__(self, what: str, done: int, total: int | None) -> None:
        if self.current is None or self.current.label != what:
            self.close()
            self.current = Progress(
                what, total, self.unit, stream=self.stream, clock=self.clock, line_every_s=self.line_every_s
            )
        self.current.update(done, total)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
            self.current = None

    def __enter__(self) -> Phases:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.close()
        elif self.current is not None and self.current.tty:
            self.current.stream.write("\n")  # leave the bar as it was; the error follows on its own line
