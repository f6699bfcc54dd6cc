"""A disk that fills up, for the buffer tests: segment files whose writes fail with ENOSPC on demand."""

from __future__ import annotations

import errno
import os
from typing import Any

import pytest

from user.buffer.disk import segment_writer


def no_space() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class FullDiskFile:
    """A segment file's stream on a disk that can fill up. While `disk.full`, a write puts half of its bytes on
    disk and fails; flush and close then fail as a BufferedWriter's do while bytes are left unwritten (close
    still closes the file)."""

    def __init__(self, stream: Any, disk: FullDisk) -> None:
        self.stream = stream
        self.disk = disk
        self.unwritten = False

    def write(self, data: bytes | memoryview) -> int:
        if self.disk.full:
            self.stream.write(bytes(data)[: len(data) // 2])
            self.stream.flush()
            self.unwritten = True
            raise no_space()
        return int(self.stream.write(data))

    def tell(self) -> int:
        return int(self.stream.tell())

    def fileno(self) -> int:
        return int(self.stream.fileno())

    def flush(self) -> None:
        if self.unwritten:
            raise no_space()
        self.stream.flush()

    def close(self) -> None:
        self.stream.close()
        if self.unwritten:
            raise no_space()

    @property
    def closed(self) -> bool:
        return bool(self.stream.closed)


class FullDisk:
    """Set `full` to make the segment files opened since `full_disk` fail their writes (and False to free space:
    files opened afterwards write again)."""

    def __init__(self) -> None:
        self.full = False
        self.files: list[FullDiskFile] = []


def full_disk(monkeypatch: pytest.MonkeyPatch) -> FullDisk:
    """From now on (until the test ends), every segment file the buffer creates lies on a `FullDisk`."""
    disk = FullDisk()

    def open_on_disk(path: Any, mode: str) -> FullDiskFile:
        file = FullDiskFile(open(path, mode), disk)  # noqa: SIM115 - closed by the segment writer
        disk.files.append(file)
        return file

    monkeypatch.setattr(segment_writer, "open", open_on_disk, raising=False)
    return disk
