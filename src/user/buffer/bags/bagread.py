"""Read rosbag2 bags written by real ROS 2 tools (`ros2 bag record`): sqlite3 (.db3) and MCAP storage.

The storage files are opened directly and their own topic tables / channels are trusted, not the
metadata.yaml: real bags exist whose metadata.yaml QoS strings disagree with what the storage holds, and
readers that match the two find no messages. metadata.yaml, when present, only says which files exist.
An MCAP file cut short (the recorder was killed, so no footer) is read up to its last whole record.
Message definitions a bag carries (MCAP schemas, the message_definitions table of rosbag2 since Iron) decode its
messages, so a bag of custom types reads without their .msg files; a bag without them decodes with the codec's
own types (Humble's and this package's).

`rosbags` decodes the messages (`user.interfaces.typestore`) but does not read the files: its Reader refuses an MCAP
file without a footer, needs a metadata.yaml and matches its QoS against the storage's (finding no message in either
real fixture bag), and orders a sqlite3 bag's messages of one timestamp otherwise, which would change its digest.
"""

from __future__ import annotations

import hashlib
import heapq
import io
import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader, SeekingReader

from user.buffer.disk.mcapscan import ScanError, WholeRecords, has_footer
from user.buffer.disk.metadata import METADATA_FILE, BagMetadata, read_metadata
from user.buffer.errors import BagReadError
from user.interfaces.codec import Codec
from user.interfaces.evolve import codec_for

_log = logging.getLogger("user.buffer.bagread")

STORAGE_SUFFIXES = {".db3": "sqlite3", ".mcap": "mcap"}
DEFINITION_ENCODINGS = ("ros2msg", "ros2idl")


@dataclass(frozen=True)
class BagMessage:
    """One serialized message of a bag."""

    topic: str
    type: str  # "pkg/msg/Type"
    log_time_ns: int  # when the recorder received it
    data: bytes  # CDR with encapsulation header
    serialization_format: str = "cdr"


@dataclass(frozen=True)
class BagTopic:
    name: str
    type: str
    serialization_format: str
    offered_qos_profiles: str


def _db3_uri(path: Path, immutable: bool) -> str:
    return f"file:{path}?mode=ro" + ("&immutable=1" if immutable else "")


def _open_db3(path: Path) -> sqlite3.Connection:
    """Open read-only; a bag in a read-only directory (no -shm can be made) is opened as immutable."""
    last: sqlite3.Error | None = None
    for immutable in (False, True):
        try:
            db = sqlite3.connect(_db3_uri(path, immutable), uri=True, timeout=5.0)
            db.execute("SELECT COUNT(*) FROM topics").fetchone()
            return db
        except sqlite3.Error as exc:
            last = exc
    raise BagReadError(f"{path}: cannot open as a rosbag2 sqlite3 file ({last})")


def _db3_topics(path: Path) -> list[BagTopic]:
    db = _open_db3(path)
    try:
        rows = db.execute("SELECT name, type, serialization_format, offered_qos_profiles FROM topics").fetchall()
    except sqlite3.Error as exc:
        raise BagReadError(f"{path}: no rosbag2 topics table ({exc})") from exc
    finally:
        db.close()
    return [BagTopic(*r) for r in rows]


def _db3_messages(path: Path) -> Iterator[BagMessage]:
    db = _open_db3(path)
    try:
        topics = {
            tid: (name, typ, fmt)
            for tid, name, typ, fmt in db.execute("SELECT id, name, type, serialization_format FROM topics")
        }
        for topic_id, stamp, data in db.execute(
            "SELECT topic_id, timestamp, data FROM messages ORDER BY timestamp, id"
        ):
            if topic_id not in topics:
                raise BagReadError(f"{path}: message of unknown topic id {topic_id}")
            name, typ, fmt = topics[topic_id]
            yield BagMessage(name, typ, int(stamp), bytes(data), fmt)
    except sqlite3.Error as exc:
        raise BagReadError(f"{path}: cannot read messages ({exc})") from exc
    finally:
        db.close()


def _db3_definitions(path: Path) -> dict[str, tuple[str, str]]:
    """type -> (encoding, text) of the message_definitions table (rosbag2 since Iron; absent before)."""
    db = _open_db3(path)
    try:
        table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'message_definitions'"
        if db.execute(table).fetchone() is None:
            return {}
        rows = db.execute("SELECT topic_type, encoding, encoded_message_definition FROM message_definitions")
        return {str(t): (str(enc), str(text)) for t, enc, text in rows if enc in DEFINITION_ENCODINGS and text}
    except sqlite3.Error as exc:
        raise BagReadError(f"{path}: cannot read message definitions ({exc})") from exc
    finally:
        db.close()


def _mcap_summary(path: Path) -> Any:
    """The MCAP summary section, or None for a file without one (cut short)."""
    with open(path, "rb") as f:
        if not has_footer(f):
            return None
        try:
            return SeekingReader(f, record_size_limit=None).get_summary()
        except (McapError, EOFError, ValueError, OSError) as exc:
            raise BagReadError(f"{path}: unreadable summary ({exc})") from exc


def _mcap_topics(path: Path) -> list[BagTopic]:
    summary = _mcap_summary(path)
    if summary is None:
        seen: dict[str, BagTopic] = {}
        for msg in _mcap_messages(path):
            seen.setdefault(msg.topic, BagTopic(msg.topic, msg.type, msg.serialization_format, ""))
        return list(seen.values())
    topics = []
    for channel in summary.channels.values():
        schema = summary.schemas.get(channel.schema_id)
        qos = channel.metadata.get("offered_qos_profiles", "")
        topics.append(BagTopic(channel.topic, schema.name if schema else "", channel.message_encoding, qos))
    return topics


def _mcap_definitions(path: Path) -> dict[str, tuple[str, str]]:
    """type -> (encoding, text) of the schemas (those of the records before the cut, for a file cut short)."""
    summary = _mcap_summary(path)
    schemas = summary.schemas.values() if summary is not None else [s for s, _, _ in _mcap_records(path) if s]
    out: dict[str, tuple[str, str]] = {}
    for schema in schemas:
        if schema.encoding in DEFINITION_ENCODINGS and schema.data:
            try:
                out[schema.name] = (schema.encoding, bytes(schema.data).decode())
            except UnicodeDecodeError as exc:
                raise BagReadError(f"{path}: the definition of {schema.name} is not UTF-8 text ({exc})") from exc
    return out


def _mcap_messages(path: Path) -> Iterator[BagMessage]:
    """Messages in log-time order when the file has a summary, else in file order up to the cut."""
    for schema, channel, message in _mcap_records(path):
        name = schema.name if schema else ""
        yield BagMessage(channel.topic, name, message.log_time, message.data, channel.message_encoding)


def _mcap_records(path: Path) -> Iterator[tuple[Any, Any, Any]]:
    """(schema, channel, message) of every message, as `_mcap_messages` orders them."""
    indexed = _mcap_summary(path) is not None
    with open(path, "rb") as f:
        reader: SeekingReader | NonSeekingReader
        if indexed:
            reader = SeekingReader(f, record_size_limit=None)
        else:
            try:
                whole = WholeRecords(f)
            except ScanError as exc:
                raise BagReadError(f"{path}: {exc}") from exc
            reader = NonSeekingReader(io.BufferedReader(whole), record_size_limit=whole.end)
        try:
            yield from reader.iter_messages(log_time_order=indexed)
        except (McapError, EOFError, ValueError) as exc:
            if indexed:
                raise BagReadError(f"{path}: {exc}") from exc
            _log.warning("%s: no footer and cut short; read up to the cut (%s)", path, exc)


class BagReader:
    """A rosbag2 bag: a directory with metadata.yaml and storage files, a directory without metadata.yaml,
    or a single .db3/.mcap file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.metadata: BagMetadata | None = None
        if self.path.is_dir():
            if (self.path / METADATA_FILE).exists():
                self.metadata = read_metadata(self.path)
            self.files = self._files_of_dir()
        elif self.path.suffix in STORAGE_SUFFIXES and self.path.exists():
            self.files = [self.path]
        else:
            raise BagReadError(f"{self.path}: not a rosbag2 bag directory, .db3 or .mcap file")
        if not self.files:
            raise BagReadError(f"{self.path}: no .db3 or .mcap storage files")

    def _files_of_dir(self) -> list[Path]:
        if self.metadata is not None and self.metadata.relative_file_paths:
            files = []
            for rel in self.metadata.relative_file_paths:
                candidate = self.path / rel
                if not candidate.exists():  # early rosbag2 versions prefixed the bag directory name
                    candidate = self.path / Path(rel).name
                if not candidate.exists():
                    raise BagReadError(f"{self.path}: metadata.yaml lists {rel}, which is missing")
                files.append(candidate)
            return files
        return sorted(p for p in self.path.iterdir() if p.suffix in STORAGE_SUFFIXES)

    def topics(self) -> dict[str, BagTopic]:
        """Topics of all storage files (from the storage itself)."""
        out: dict[str, BagTopic] = {}
        for path in self.files:
            for topic in _db3_topics(path) if path.suffix == ".db3" else _mcap_topics(path):
                out.setdefault(topic.name, topic)
        return out

    def messages(self, topics: set[str] | None = None) -> Iterator[BagMessage]:
        """Every message (of `topics`, if given) of every file, merged in log-time order."""
        streams = [_db3_messages(p) if p.suffix == ".db3" else _mcap_messages(p) for p in self.files]
        for msg in heapq.merge(*streams, key=lambda m: m.log_time_ns):
            if topics is None or msg.topic in topics:
                yield msg

    def definitions(self) -> dict[str, tuple[str, str]]:
        """The message definitions the bag carries: type -> (encoding "ros2msg" or "ros2idl", text)."""
        out: dict[str, tuple[str, str]] = {}
        for path in self.files:
            for typename, definition in (
                _db3_definitions(path) if path.suffix == ".db3" else _mcap_definitions(path)
            ).items():
                out.setdefault(typename, definition)
        return out

    def codec(self, base: Codec, topics: set[str] | None = None) -> Codec:
        """A codec for the messages of `topics` (all, if None): `base` with the definitions the bag carries for
        their types, which describe its bytes and so win over `base`'s; `base` itself when it carries none."""
        wanted = {t.type for t in self.topics().values() if topics is None or t.name in topics}

        def known_here(typename: str, exc: ValueError) -> None:
            if not base.has_type(typename):
                raise BagReadError(f"{self.path}: {exc}") from exc
            _log.warning("%s: %s; decoding %s with the definition known here", self.path, exc, typename)

        carried = {name: definition for name, definition in self.definitions().items() if name in wanted}
        try:
            return codec_for(carried, base, unparsable=known_here)
        except ValueError as exc:  # the definitions do not fit together
            raise BagReadError(f"{self.path}: its message definitions do not fit together ({exc})") from exc

    def digest(self) -> str:
        """SHA-256 of the messages (topic, type, log time, bytes, in log-time order): the same recording has the same
        digest whatever its file names, storage format or metadata.yaml."""
        h = hashlib.sha256()
        for msg in self.messages():
            h.update(f"{msg.topic}\0{msg.type}\0{msg.log_time_ns}\0{len(msg.data)}\0".encode())
            h.update(msg.data)
        return h.hexdigest()

    def decode(self, msg: BagMessage, codec: Codec) -> Any:
        """The message object (a type of Humble's standard set or this package's msg/)."""
        if msg.serialization_format != "cdr":
            raise BagReadError(f"{msg.topic}: serialization {msg.serialization_format!r} is not cdr")
        return codec.decode(msg.data, msg.type)
