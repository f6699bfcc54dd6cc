"""The `keyboard` pedal source: single key presses read from a terminal, without Enter (ROS-free).

For a site without a foot pedal: the operator presses a character in a terminal (by default /dev/tty, the one
the node was started from) instead of stepping on the pedal. While the source is open the terminal is in
cbreak mode (no line buffering, no echo, reads that return at once; Ctrl-C still interrupts), and `close`
puts it back as it was, also after a read failed. Each configured character is reported as the pedal key it
stands for (e.g. "s" as "KEY_A"), stamped with the wall clock when it was read, like an evdev press; any
other character is ignored. A path that is not a terminal, or a terminal this process may not read (no
controlling terminal, or one it runs in the background of), is a `DeviceError` naming the path.
"""

from __future__ import annotations

import codecs
import logging
import os
import termios
import time
from collections.abc import Sequence
from typing import Any

from user.teleop.errors import DeviceError
from user.teleop.pedal import PedalPress

NAMED_CHARS = {"space": " ", "enter": "\n", "tab": "\t"}  # names of the characters a setting cannot show
READ_BYTES = 4096  # read at most this much per poll; the rest waits for the next one

_log = logging.getLogger(__name__)


def parse_char(name: str) -> str:
    """The character a key setting names: one printable character, or `space`, `enter` or `tab`."""
    if name in NAMED_CHARS:
        return NAMED_CHARS[name]
    if len(name) == 1 and name.isprintable() and not name.isspace():
        return name
    raise DeviceError(f"{name!r} is no terminal key: give one character or one of {', '.join(NAMED_CHARS)}")


def char_map(keys: Sequence[tuple[str, str]]) -> dict[str, str]:
    """(character setting, key it is reported as) pairs -> {character: key}; one character for two keys is an
    error, never a press silently given to one of them."""
    chars: dict[str, str] = {}
    for name, key in keys:
        char = parse_char(name)
        if char in chars:
            raise DeviceError(f"the terminal key {name!r} is given for both {chars[char]} and {key}")
        chars[char] = key
    return chars


class KeyboardPedal:
    """A terminal used as a pedal: `keys` pairs each character (see `parse_char`) with the key it reports."""

    def __init__(self, path: str, keys: Sequence[tuple[str, str]]) -> None:
        self.path = path
        self._keys = char_map(keys)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._fd = _open_terminal(path)
        try:
            self._saved: list[Any] = termios.tcgetattr(self._fd)
            termios.tcsetattr(self._fd, termios.TCSANOW, _cbreak(self._saved))
        except termios.error as exc:
            os.close(self._fd)
            self._fd = -1
            raise DeviceError(f"cannot set up the terminal {path} for single key presses: {exc}") from exc

    def poll(self) -> list[PedalPress]:
        """The mapped characters typed since the last poll; never blocks."""
        if self._fd < 0:
            raise DeviceError(f"the terminal {self.path} is closed")
        try:
            data = os.read(self._fd, READ_BYTES)
        except BlockingIOError:
            return []
        except OSError as exc:
            raise DeviceError(f"the terminal {self.path} failed: {exc.strerror or exc}") from exc
        if not data:  # with nothing typed the read is EAGAIN; an end of file means the terminal is gone
            raise DeviceError(f"the terminal {self.path} was closed (hung up)")
        stamp = time.time_ns()
        presses: list[PedalPress] = []
        for char in self._decoder.decode(data):
            key = self._keys.get(char)
            if key is None:
                _log.debug("ignoring %r typed on %s", char, self.path)
            else:
                presses.append(PedalPress(key, stamp))
        return presses

    def close(self) -> None:
        """Put the terminal back in the mode it had (whatever happened before) and close it; twice is harmless."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            termios.tcsetattr(fd, termios.TCSANOW, self._saved)
        except termios.error as exc:
            _log.warning("could not restore the mode of the terminal %s: %s", self.path, exc)
        finally:
            os.close(fd)


def _open_terminal(path: str) -> int:
    """A non-blocking descriptor of the terminal at `path`; a `DeviceError` when it is none or not ours to read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise DeviceError(
            f"cannot open the terminal {path}: {exc.strerror or exc} (the keyboard source needs a terminal: start "
            "the node from one, or set tty_path to one)"
        ) from exc
    problem = None
    if not os.isatty(fd):
        problem = f"{path} is not a terminal (TTY): the keyboard source reads key presses from one"
    elif _in_background(fd):
        problem = f"the terminal {path} is in use by another job: run the pedal node in the foreground"
    if problem is not None:
        os.close(fd)
        raise DeviceError(problem)
    return fd


def _in_background(fd: int) -> bool:
    """Whether `fd` is this process's controlling terminal with another process group in the foreground (reading
    it would stop the process). A terminal that is not the controlling one has no foreground group of ours."""
    try:
        return os.tcgetpgrp(fd) != os.getpgrp()
    except OSError:
        return False


def _cbreak(mode: list[Any]) -> list[Any]:
    """`mode` with line buffering and echo off: each character can be read as it is typed (a non-blocking read of
    at least one character: EAGAIN while there is none, end of file only once the terminal hung up)."""
    new = list(mode)
    new[3] &= ~(termios.ICANON | termios.ECHO)  # lflag
    cc = list(mode[6])
    cc[termios.VMIN] = 1
    cc[termios.VTIME] = 0
    new[6] = cc
    return new
