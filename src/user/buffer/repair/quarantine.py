"""Quarantine: where the buffer keeps the original bytes of files it had to repair or replace, never deleting them.

`DIR/quarantine/<label>-<ns>/` holds the files as they were (a hard link where the file stays in use, so keeping it
costs no copy until the original is replaced; else a copy, or the file itself moved there) and `why.txt`, which
says what was wrong and what the buffer kept. Nothing in the buffer reads them again; an operator may inspect,
restore or delete them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from user.buffer.disk.metadata import fsync_dir
from user.interfaces.stamps import now_ns

QUARANTINE_DIR = "quarantine"
WHY_FILE = "why.txt"


def quarantine(directory: Path, label: str, files: Sequence[Path], why: Sequence[str], *, move: bool = False) -> Path:
    """Keep `files` of buffer `directory` under quarantine/`label`-<ns>/ with `why` (one line each) beside them.

    `move=False` keeps the file in place as well (hard link, else copy); `move=True` takes it away (rename).
    Returns the folder; every file and the folder are durable when this returns."""
    folder = _new_folder(directory / QUARANTINE_DIR, f"{label}-{now_ns()}")
    for path in files:
        kept = folder / path.name
        if move:
            os.replace(path, kept)
        else:
            _keep_copy(path, kept)
    note(folder, why)
    fsync_dir(folder)
    fsync_dir(folder.parent)
    if move:
        for parent in {p.parent for p in files}:
            fsync_dir(parent)
    return folder


def _new_folder(parent: Path, name: str) -> Path:
    """A folder `name` under `parent` that did not exist before (never mixing two quarantines)."""
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        folder = parent / (name if n == 0 else f"{name}.{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise FileExistsError(f"{parent / name}: a thousand quarantine folders of this name already")


def note(folder: Path, why: Sequence[str]) -> None:
    """Add lines to the why.txt of quarantine `folder` (durably)."""
    with open(folder / WHY_FILE, "a", encoding="utf-8") as out:
        out.write("".join(f"{line}\n" for line in why))
        out.flush()
        os.fsync(out.fileno())


def _keep_copy(path: Path, kept: Path) -> None:
    try:
        os.link(path, kept)  # the same bytes under a second name: survives the original being replaced
    except OSError:  # a file system without hard links
        shutil.copyfile(path, kept)
        with open(kept, "rb+") as f:
            os.fsync(f.fileno())
