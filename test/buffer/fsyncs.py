"""Which files reach stable storage: a spy on `os.fsync` for the buffer tests."""

from __future__ import annotations

import os

import pytest


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on (until the test ends), the path of every file `os.fsync` is called on, in order."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced
