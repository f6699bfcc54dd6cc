"""`OutboxSpool`: a robot's completed, unacknowledged episodes on disk, so a killed robot node still delivers them.

The outbox (`user.robot_loop.outbox`) re-sends an episode the learner has not acknowledged; held in memory only,
a `kill -9` of the robot node loses every episode waiting there. With a spool, each episode is written when it
completes and removed when the learner acknowledges it; a restarted node loads what is left and re-sends it.

One file per episode. With a `SpoolChannel` (what the robot node gives it) each is a small MCAP file,
`<episode id>.mcap` (profile ros2, the message type's ros2msg schema, CDR messages on the robot's transitions
topic): a spooled backlog opens in Foxglove or `mcap` like any bag. Without one, `<episode id>.episode` holds the
messages' bytes, each behind its length (uint32 little endian); both are read back. A file is written under a
temporary name and renamed into place, so a file that exists is whole; it is not fsynced (it survives the
process's death, which is what it is for, not a power cut). A file that cannot be read is moved aside as
`<name>.unreadable` and reported once, never re-sent half.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from mcap.exceptions import McapError
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from user.interfaces.codec import Codec
from user.interfaces.evolve import codec_for, migrate

_LENGTH = struct.Struct("<I")
SUFFIX = ".episode"  # length-framed messages
MCAP_SUFFIX = ".mcap"  # an MCAP file (with a SpoolChannel)


@dataclass(frozen=True)
class SpoolChannel:
    """What the spooled messages are, for MCAP files."""

    topic: str  # e.g. /arm/transitions
    typename: str  # e.g. user/msg/Transition
    definition: str  # its ros2msg text with dependencies (Codec.definition)


_log = logging.getLogger(__name__)


class SpoolError(OSError):
    """The spool directory cannot be used (not creatable, not writable)."""


class OutboxSpool:
    """Episodes (lists of messages) by id, in `directory`; `encode`/`decode` turn a message into CDR and back."""

    def __init__(
        self,
        directory: Path,
        encode: Callable[[Any], bytes],
        decode: Callable[[bytes], Any],
        channel: SpoolChannel | None = None,
        decode_as_written: Callable[[bytes, str], Any] | None = None,
    ) -> None:
        self.directory = directory
        self.channel = channel
        self._encode = encode
        self._decode = decode
        # an MCAP file written with another definition than `channel`'s (before an upgrade): its message from the
        # bytes and that definition's text, as today's type
        self._decode_as_written = decode_as_written
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpoolError(f"{directory}: cannot create the outbox spool ({exc.strerror or exc})") from exc

    @classmethod
    def of(cls, directory: Path, codec: Codec, typename: str, topic: str) -> OutboxSpool:
        """A spool of `typename` messages published on `topic`, as MCAP files."""
        channel = SpoolChannel(topic, typename, codec.definition(typename))
        older: dict[str, Codec] = {}

        def as_written(raw: bytes, text: str) -> Any:
            if text not in older:
                older[text] = codec_for({typename: ("ros2msg", text)}, codec)
            return migrate(older[text].decode(raw, typename), older[text], codec)

        return cls(
            directory,
            lambda m: codec.encode(m, typename),
            lambda raw: codec.decode(raw, typename),
            channel,
            as_written,
        )

    def path(self, episode_id: int) -> Path:
        return self.directory / f"{episode_id}{MCAP_SUFFIX if self.channel else SUFFIX}"

    def save(self, episode_id: int, messages: Sequence[Any]) -> None:
        """Write one completed episode (replacing an older file of the same id)."""
        raws = [self._encode(m) for m in messages]
        target = self.path(episode_id)
        tmp = target.with_name(f".{target.name}.tmp")
        if self.channel is None:
            tmp.write_bytes(b"".join(_LENGTH.pack(len(raw)) + raw for raw in raws))
        else:
            with open(tmp, "wb") as stream:
                write_mcap(stream, self.channel, raws)
        os.replace(tmp, target)

    def remove(self, episode_id: int) -> None:
        for suffix in (SUFFIX, MCAP_SUFFIX):
            (self.directory / f"{episode_id}{suffix}").unlink(missing_ok=True)

    def load(self) -> list[tuple[int, list[Any]]]:
        """Every whole episode in the spool, by id; unreadable files are moved aside and reported."""
        out: list[tuple[int, list[Any]]] = []
        paths = [*self.directory.glob(f"*{SUFFIX}"), *self.directory.glob(f"*{MCAP_SUFFIX}")]
        for path in sorted(paths):
            try:
                out.append((_episode_of(path), self._read(path)))
            except (OSError, ValueError) as exc:
                aside = path.with_name(path.name + ".unreadable")
                os.replace(path, aside)
                _log.error("outbox spool: %s is unreadable (%s); moved aside to %s, not re-sent", path, exc, aside)
        return sorted(out, key=lambda item: item[0])

    def _read(self, path: Path) -> list[Any]:
        messages: list[Any] = []
        if path.suffix == MCAP_SUFFIX:
            raws, text = read_mcap(path)
            if self._decode_as_written is not None and self.channel is not None and text != self.channel.definition:
                messages = [self._decode_as_written(raw, text) for raw in raws]
            else:
                messages = [self._decode(raw) for raw in raws]
            if not messages:
                raise ValueError("no message")
            return messages
        data = path.read_bytes()
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


def write_mcap(stream: BinaryIO, channel: SpoolChannel, raws: Sequence[bytes]) -> None:
    """One episode's messages as an MCAP file (profile ros2, ros2msg schema, CDR)."""
    writer = Writer(stream, compression=CompressionType.NONE)
    writer.start(profile="ros2", library="user-outbox")
    schema = writer.register_schema(name=channel.typename, encoding="ros2msg", data=channel.definition.encode())
    channel_id = writer.register_channel(topic=channel.topic, message_encoding="cdr", schema_id=schema)
    stamp = time.time_ns()
    for k, raw in enumerate(raws):
        writer.add_message(channel_id, log_time=stamp + k, data=raw, publish_time=stamp + k, sequence=k)
    writer.finish()  # type: ignore[no-untyped-call]  # mcap leaves it unannotated


def read_mcap(path: Path) -> tuple[list[bytes], str]:
    """The messages of a spooled MCAP file, in order, and the definition they were written with (its first
    message's schema); `ValueError` when it does not read."""
    try:
        with open(path, "rb") as stream:
            found = list(make_reader(stream).iter_messages(log_time_order=False))
            text = found[0][0].data.decode() if found and found[0][0] is not None else ""
            return [message.data for _, _, message in found], text
    except (McapError, struct.error, EOFError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a readable MCAP file: {exc}") from exc


def _episode_of(path: Path) -> int:
    """The episode id a spool file is named after; `ValueError` for a name that is not one."""
    stem = path.name[: -len(path.suffix)]
    if not stem.isdigit():
        raise ValueError(f"{path.name} is not named <episode id>{path.suffix}")
    return int(stem)
