"""`OutboxSpool`: a robot's completed, unacknowledged episodes on disk, so a killed robot node still delivers them.

The outbox (`user.robot_loop.outbox`) re-sends an episode the learner has not acknowledged; held in memory only,
a `kill -9` of the robot node loses every episode waiting there. With a spool, each episode is written when it
completes and removed when the learner acknowledges it; a restarted node loads what is left and re-sends it.

One file per episode, `<episode id>.episode`: the messages' CDR bytes, each behind its length (uint32 little
endian). A file is written under a temporary name and renamed into place, so a file that exists is whole; it is
not fsynced (it survives the process's death, which is what it is for, not a power cut). A file that cannot be
read is moved aside as `<name>.unreadable` and reported once, never re-sent half.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_LENGTH = struct.Struct("<I")
SUFFIX = ".episode"
_log = logging.getLogger(__name__)


class SpoolError(OSError):
    """The spool directory cannot be used (not creatable, not writable)."""


class OutboxSpool:
    """Episodes (lists of messages) by id, in `directory`; `encode`/`decode` turn a message into CDR and back."""

    def __init__(self, directory: Path, encode: Callable[[Any], bytes], decode: Callable[[bytes], Any]) -> None:
        self.directory = directory
        self._encode = encode
        self._decode = decode
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(f"{directory}: cannot create the outbox spool ({exc.strerror or exc})") from exc

    def path(self, episode_id: int) -> Path:
        return self.directory / f"{episode_id}{SUFFIX}"

    def save(self, episode_id: int, messages: Sequence[Any]) -> None:
        """Write one completed episode (replacing an older file of the same id)."""
        body = b"".join(_LENGTH.pack(len(raw)) + raw for raw in (self._encode(m) for m in messages))
        target = self.path(episode_id)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, target)

    def remove(self, episode_id: int) -> None:
        self.path(episode_id).unlink(missing_ok=True)

    def load(self) -> list[tuple[int, list[Any]]]:
        """Every whole episode in the spool, by id; unreadable files are moved aside and reported."""
        out: list[tuple[int, list[Any]]] = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            try:
                out.append((_episode_of(path), self._read(path)))
            except (OSError, ValueError) as exc:
                aside = path.with_name(path.name + ".unreadable")
                os.replace(path, aside)
                _log.error("outbox spool: %s is unreadable (%s); moved aside to %s, not re-sent", path, exc, aside)
        return sorted(out, key=lambda item: item[0])

    def _read(self, path: Path) -> list[Any]:
        data = path.read_bytes()
        messages: list[Any] = []
        pos = 0
        while pos < len(data):
            if pos + _LENGTH.size > len(data):
                raise ValueError(f"a length cut short at byte {pos}")
            (size,) = _LENGTH.unpack_from(data, pos)
            pos += _LENGTH.size
            if pos + size > len(data):
                raise ValueError(f"a message of {size} bytes at byte {pos} runs past the end ({len(data)} bytes)")
            messages.append(self._decode(data[pos : pos + size]))
            pos += size
        if not messages:
            raise ValueError("no message")
        return messages


def _episode_of(path: Path) -> int:
    """The episode id a spool file is named after; `ValueError` for a name that is not one."""
    stem = path.name[: -len(SUFFIX)]
    if not stem.isdigit():
        raise ValueError(f"{path.name} is not named <episode id>{SUFFIX}")
    return int(stem)
