"""Quarantine: the original bytes of a replaced file are kept aside with why, never deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from test.buffer.fsyncs import record_fsyncs
from user.buffer.repair import quarantine as module
from user.buffer.repair.quarantine import QUARANTINE_DIR, WHY_FILE, note, quarantine


def _file(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_kept_file_survives_its_original_being_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = _file(tmp_path / "segments" / "seg_000003" / "seg_000003_0.mcap", b"original bytes")
    synced = record_fsyncs(monkeypatch)
    folder = quarantine(tmp_path, "seg_000003", [original], ["one line", "and another"])
    assert folder.parent == tmp_path / QUARANTINE_DIR and folder.name.startswith("seg_000003-")
    (original.parent / "new").write_bytes(b"rewritten")
    os.replace(original.parent / "new", original)  # what recovery does next
    assert (folder / original.name).read_bytes() == b"original bytes" and original.read_bytes() == b"rewritten"
    assert (folder / WHY_FILE).read_text() == "one line\nand another\n"
    assert str(folder) in synced and str(folder.parent) in synced  # the new names are durable


def test_without_hard_links_the_file_is_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = _file(tmp_path / "a.mcap", b"x" * 1000)

    def no_links(_src: object, _dst: object) -> None:
        raise OSError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    folder = quarantine(tmp_path, "a", [original], ["why"])
    assert (folder / "a.mcap").read_bytes() == b"x" * 1000 and os.stat(folder / "a.mcap").st_nlink == 1
    original.write_bytes(b"changed in place")
    assert (folder / "a.mcap").read_bytes() == b"x" * 1000  # a copy, not the same file


def test_moved_files_leave_their_place_and_notes_add_up(tmp_path: Path) -> None:
    files = [_file(tmp_path / name, name.encode()) for name in ("index.sqlite3", "index.sqlite3-wal")]
    folder = quarantine(tmp_path, "index", files, ["replaced"], move=True)
    assert not any(f.exists() for f in files)
    assert sorted(p.name for p in folder.iterdir()) == ["index.sqlite3", "index.sqlite3-wal", WHY_FILE]
    note(folder, ["later: two episodes lost"])
    assert (folder / WHY_FILE).read_text() == "replaced\nlater: two episodes lost\n"


def test_two_quarantines_never_share_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "now_ns", lambda: 42)
    first = quarantine(tmp_path, "seg", [_file(tmp_path / "one", b"1")], ["first"])
    second = quarantine(tmp_path, "seg", [_file(tmp_path / "two", b"2")], ["second"])
    assert (first.name, second.name) == ("seg-42", "seg-42.1")
    assert (first / WHY_FILE).read_text() == "first\n" and (second / WHY_FILE).read_text() == "second\n"
