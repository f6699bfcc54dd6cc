"""rosbag2's metadata.yaml: written as Humble writes it (version 5), read in any version 1 to 9.

Humble (rosbag2 0.15) writes version 5 and reads newer files without a version check, but version 9
turned `offered_qos_profiles` from a YAML string into a YAML list, which Humble cannot parse; so every
segment of the buffer declares version 5, with Humble's fields only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from user.buffer.errors import BagReadError

METADATA_FILE = "metadata.yaml"
HUMBLE_VERSION = 5

_INFINITE_SEC = 2147483647  # rmw's "infinite" duration, as Humble stores it
_INFINITE_NSEC = 4294967295


def qos_profile_yaml(*, reliable: bool = True, transient_local: bool = False) -> str:
    """One offered QoS profile as the YAML string Humble's recorder stores (a list of one profile)."""
    return (
        "- history: 3\n"
        "  depth: 0\n"
        f"  reliability: {1 if reliable else 2}\n"
        f"  durability: {1 if transient_local else 2}\n"
        f"  deadline:\n    sec: {_INFINITE_SEC}\n    nsec: {_INFINITE_NSEC}\n"
        f"  lifespan:\n    sec: {_INFINITE_SEC}\n    nsec: {_INFINITE_NSEC}\n"
        "  liveliness: 1\n"
        f"  liveliness_lease_duration:\n    sec: {_INFINITE_SEC}\n    nsec: {_INFINITE_NSEC}\n"
        "  avoid_ros_namespace_conventions: false"
    )


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag and how many messages it holds."""

    name: str
    type: str
    serialization_format: str = "cdr"
    offered_qos_profiles: str = ""
    message_count: int = 0


@dataclass(frozen=True)
class FileInfo:
    """One storage file of a bag (version 5 and later)."""

    path: str
    starting_time_ns: int
    duration_ns: int
    message_count: int


@dataclass(frozen=True)
class BagMetadata:
    """The content of a metadata.yaml."""

    storage_identifier: str
    relative_file_paths: tuple[str, ...]
    topics: tuple[TopicInfo, ...]
    starting_time_ns: int = 0
    duration_ns: int = 0
    message_count: int = 0
    files: tuple[FileInfo, ...] = ()
    version: int = HUMBLE_VERSION
    compression_format: str = ""
    compression_mode: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # fields of later versions, kept as read


def to_yaml(meta: BagMetadata) -> str:
    """metadata.yaml text with Humble's version-5 fields, in the order Humble writes them."""
    info: dict[str, Any] = {
        "version": HUMBLE_VERSION,
        "storage_identifier": meta.storage_identifier,
        "duration": {"nanoseconds": int(meta.duration_ns)},
        "starting_time": {"nanoseconds_since_epoch": int(meta.starting_time_ns)},
        "message_count": int(meta.message_count),
        "topics_with_message_count": [
            {
                "topic_metadata": {
                    "name": t.name,
                    "type": t.type,
                    "serialization_format": t.serialization_format,
                    "offered_qos_profiles": t.offered_qos_profiles,
                },
                "message_count": int(t.message_count),
            }
            for t in meta.topics
        ],
        "compression_format": meta.compression_format,
        "compression_mode": meta.compression_mode,
        "relative_file_paths": list(meta.relative_file_paths),
        "files": [
            {
                "path": f.path,
                "starting_time": {"nanoseconds_since_epoch": int(f.starting_time_ns)},
                "duration": {"nanoseconds": int(f.duration_ns)},
                "message_count": int(f.message_count),
            }
            for f in meta.files
        ],
    }
    text = yaml.safe_dump(
        {"rosbag2_bagfile_information": info}, sort_keys=False, default_flow_style=False, width=1 << 20
    )
    return str(text)


def write_metadata(bag_dir: Path, meta: BagMetadata, *, fsync: bool = True) -> Path:
    """Write `bag_dir`/metadata.yaml atomically (temporary file, then rename)."""
    path = bag_dir / METADATA_FILE
    tmp = bag_dir / f".{METADATA_FILE}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(to_yaml(meta))
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(bag_dir)
    return path


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_metadata(bag_dir: Path) -> BagMetadata:
    """Parse `bag_dir`/metadata.yaml of any rosbag2 version (1 to 9); `BagReadError` says what is wrong."""
    path = bag_dir / METADATA_FILE
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BagReadError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise BagReadError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    except yaml.YAMLError as exc:
        raise BagReadError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError as exc:
        raise BagReadError(f"{path}: not valid YAML: nested too deeply") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("rosbag2_bagfile_information"), dict):
        raise BagReadError(f"{path}: no 'rosbag2_bagfile_information' mapping")
    info = doc["rosbag2_bagfile_information"]
    try:
        return _parse(info)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field of another type than Humble's
        raise BagReadError(f"{path}: malformed metadata ({type(exc).__name__}: {exc})") from exc


def _parse(info: dict[str, Any]) -> BagMetadata:
    topics = tuple(_parse_topic(item) for item in info.get("topics_with_message_count") or [])
    files = tuple(
        FileInfo(
            path=str(f["path"]),
            starting_time_ns=int(f["starting_time"]["nanoseconds_since_epoch"]),
            duration_ns=int(f["duration"]["nanoseconds"]),
            message_count=int(f["message_count"]),
        )
        for f in info.get("files") or []
    )
    known = {
        "version",
        "storage_identifier",
        "duration",
        "starting_time",
        "message_count",
        "topics_with_message_count",
        "compression_format",
        "compression_mode",
        "relative_file_paths",
        "files",
    }
    return BagMetadata(
        version=int(info["version"]),
        storage_identifier=str(info["storage_identifier"]),
        relative_file_paths=tuple(str(p) for p in info.get("relative_file_paths") or []),
        topics=topics,
        starting_time_ns=int((info.get("starting_time") or {}).get("nanoseconds_since_epoch", 0)),
        duration_ns=int((info.get("duration") or {}).get("nanoseconds", 0)),
        message_count=int(info.get("message_count", 0)),
        files=files,
        compression_format=str(info.get("compression_format") or ""),
        compression_mode=str(info.get("compression_mode") or ""),
        extra={k: v for k, v in info.items() if k not in known},
    )


def _parse_topic(item: dict[str, Any]) -> TopicInfo:
    tm = item["topic_metadata"]
    qos = tm.get("offered_qos_profiles", "")
    if not isinstance(qos, str):  # version 9 and later: a YAML list
        qos = yaml.safe_dump(qos, sort_keys=False) if qos else ""
    return TopicInfo(
        name=str(tm["name"]),
        type=str(tm["type"]),
        serialization_format=str(tm.get("serialization_format", "cdr")),
        offered_qos_profiles=qos,
        message_count=int(item.get("message_count", 0)),
    )
