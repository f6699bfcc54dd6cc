"""The `keyboard` pedal source on a real pseudo-terminal (characters written into its master side)."""

from __future__ import annotations

import errno
import os
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from test.conftest import wait_until
from user.teleop.errors import DeviceError
from user.teleop.keyboard_pedal import KeyboardPedal, parse_char
from user.teleop.pedal import PedalPress

KEYS = [("s", "KEY_A"), ("f", "KEY_C"), ("space", "KEY_B")]


@dataclass
class Pty:
    master: int
    slave: int
    path: str

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def lflag(self) -> int:
        return int(termios.tcgetattr(self.slave)[3])


@pytest.fixture
def pty() -> Iterator[Pty]:
    master, slave = os.openpty()
    terminal = Pty(master, slave, os.ttyname(slave))
    yield terminal
    for fd in (terminal.master, terminal.slave):
        if fd >= 0:
            os.close(fd)


def collect(source: KeyboardPedal, count: int) -> list[PedalPress]:
    """Poll until `count` presses came (or the deadline passed)."""
    presses: list[PedalPress] = []

    def enough() -> bool:
        presses.extend(source.poll())
        return len(presses) >= count

    wait_until(enough, 5.0)
    return presses


def test_typed_characters_are_reported_as_their_keys_without_enter(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, KEYS)
    try:
        assert source.poll() == []  # nothing typed: returns at once with nothing
        before = time.time_ns()
        pty.type("sx f")  # no Enter: cbreak mode hands over each character as it is typed
        presses = collect(source, 3)
        assert [p.key for p in presses] == ["KEY_A", "KEY_B", "KEY_C"]  # 'x' is no key
        assert all(before <= p.stamp_ns <= time.time_ns() for p in presses)
    finally:
        source.close()


def test_configured_characters_choose_the_keys(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, [("enter", "KEY_A"), ("1", "KEY_C"), ("é", "KEY_B")])
    try:
        pty.type("s1é\r")  # the terminal turns Enter's \r into \n; é arrives as two bytes
        assert [p.key for p in collect(source, 3)] == ["KEY_C", "KEY_B", "KEY_A"]
    finally:
        source.close()


def test_the_terminal_mode_is_cbreak_while_open_and_restored_on_close(pty: Pty) -> None:
    original = pty.lflag()
    assert original & termios.ICANON and original & termios.ECHO
    source = KeyboardPedal(pty.path, KEYS)
    assert not pty.lflag() & (termios.ICANON | termios.ECHO)
    assert pty.lflag() & termios.ISIG  # Ctrl-C still interrupts the node
    source.close()
    assert pty.lflag() == original
    source.close()  # twice is harmless
    with pytest.raises(DeviceError, match="closed"):
        source.poll()


def test_the_mode_is_restored_after_a_read_failed(pty: Pty, monkeypatch: pytest.MonkeyPatch) -> None:
    original = pty.lflag()
    source = KeyboardPedal(pty.path, KEYS)

    def broken_read(fd: int, n: int) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patch:
        patch.setattr(os, "read", broken_read)
        with pytest.raises(DeviceError, match=f"{pty.path} failed: Input/output error"):
            source.poll()
    source.close()
    assert pty.lflag() == original


def test_a_hung_up_terminal_is_a_device_error(pty: Pty) -> None:
    source = KeyboardPedal(pty.path, KEYS)
    try:
        os.close(pty.master)
        pty.master = -1
        with pytest.raises(DeviceError, match=pty.path):
            source.poll()
    finally:
        source.close()


def test_a_path_that_is_not_a_terminal_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "not_a_tty"
    plain.write_text("s")
    with pytest.raises(DeviceError, match=f"{plain} is not a terminal"):
        KeyboardPedal(str(plain), KEYS)
    with pytest.raises(DeviceError, match=f"cannot open the terminal {tmp_path}/missing"):
        KeyboardPedal(str(tmp_path / "missing"), KEYS)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([("s", "KEY_A"), ("ab", "KEY_B")], "'ab' is no terminal key"),
        ([("s", "KEY_A"), ("", "KEY_B")], "'' is no terminal key"),
        ([("s", "KEY_A"), (" ", "KEY_B")], "' ' is no terminal key"),  # written `space`
        ([("space", "KEY_A"), ("s", "KEY_C"), ("s", "KEY_B")], "'s' is given for both KEY_C and KEY_B"),
    ],
)
def test_bad_key_characters_are_refused_before_the_terminal_is_touched(
    pty: Pty, keys: list[tuple[str, str]], message: str
) -> None:
    original = pty.lflag()
    with pytest.raises(DeviceError, match=message):
        KeyboardPedal(pty.path, keys)
    assert pty.lflag() == original


def test_named_characters() -> None:
    assert [parse_char(n) for n in ("space", "enter", "tab", "q", "+")] == [" ", "\n", "\t", "q", "+"]
