"""A buffer directory: where its segments lie, and the lock its one writer holds.

DIR/LOCK                                  the writer's lock (`lock_directory`)
DIR/segments/seg_000000/                  one rosbag2 bag per segment (`user.buffer.disk.segments`)
DIR/segments/seg_000000/seg_000000_0.mcap
DIR/segments/seg_000000/metadata.yaml
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from user.buffer.errors import BufferLockedError

SEGMENTS_DIR = "segments"
SEGMENT_NAME = re.compile(r"seg_[0-9]{6,}")
LOCK_FILE = "LOCK"


def segment_name(number: int) -> str:
    return f"seg_{number:06d}"


def segment_file_name(name: str) -> str:
    """The MCAP file inside bag directory `name` (rosbag2 names the first file of bag X "X_0.mcap")."""
    return f"{name}_0.mcap"


def segment_path(directory: Path, name: str) -> Path:
    """The MCAP file of segment `name` under buffer `directory`."""
    return directory / SEGMENTS_DIR / name / segment_file_name(name)


def has_segments(directory: Path) -> bool:
    """Whether `directory` holds at least one segment directory."""
    root = directory / SEGMENTS_DIR
    return root.is_dir() and any(p.is_dir() for p in root.iterdir())


def lock_directory(directory: Path) -> int:
    """Take the exclusive writer lock of buffer `directory` (`BufferLockedError` if another process holds it)."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BufferLockedError(
            f"{directory}: another process is writing to this buffer; open it read-only instead"
        ) from None
    return fd
