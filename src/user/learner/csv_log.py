"""An append-only CSV file of a run (progress.csv, episodes.csv) that a resumed run continues.

A file written by an older version with other columns is rewritten once under today's header before anything
is appended: a renamed column keeps its values under the new name, a new column is empty in the old rows, an
old column today's header lacks is kept after it, and no row is lost (the rewrite goes to a temporary file
renamed over the old one). A last row a kill cut short is ended before the next row is appended, so it never
swallows that row."""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

_log = logging.getLogger("user.learner.progress")


def _open(path: Path, mode: str) -> IO[str]:
    """The csv module's way: no newline translation (it writes its own line ends)."""
    return open(path, mode, newline="", encoding="utf-8")


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of CSV file `path` by column name; none when it does not exist."""
    if not path.exists():
        return []
    with _open(path, "r") as f:
        return list(csv.DictReader(f))


def _ends_whole(path: Path) -> bool:
    """Whether non-empty file `path` ends with a line end (a kill can leave its last row cut short)."""
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def header(path: Path) -> list[str]:
    """The column names of CSV file `path`; empty when it is empty."""
    with _open(path, "r") as f:
        return next(csv.reader(f), [])


def upgrade(path: Path, columns: Sequence[str], renamed: Mapping[str, str]) -> bool:
    """Rewrite `path` under header `columns` unless its header starts with them (old name -> new name in
    `renamed`); True when it was rewritten."""
    old = header(path)
    if old[: len(columns)] == list(columns):
        return False
    names = list(columns) + [c for c in old if c not in columns and c not in renamed]
    tmp = path.with_name(path.name + ".tmp")
    with _open(tmp, "w") as f:
        writer = csv.DictWriter(f, names, extrasaction="ignore")  # a row longer than its header: the rest
        writer.writeheader()
        for row in read_rows(path):
            writer.writerow({renamed.get(k, k): v for k, v in row.items()})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _log.info("%s: rewritten under today's columns (it had %s)", path, ", ".join(old))
    return True


class CsvLog:
    """Rows appended and flushed one at a time under a fixed header (today's columns first)."""

    def __init__(self, path: Path, columns: Sequence[str], renamed: Mapping[str, str] | None = None) -> None:
        self.path = path
        new = not path.exists() or not header(path)
        if not new:
            upgrade(path, columns, renamed or {})
        self.columns = tuple(columns) if new else tuple(header(path))
        self._file = _open(path, "a")
        self._csv = csv.DictWriter(self._file, self.columns)
        if not new and not _ends_whole(path):
            self._file.write("\r\n")  # the cut row stays a row of its own (read as not whole), this one too
        if new:
            self._csv.writeheader()
            self._file.flush()

    def append(self, row: Mapping[str, object]) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise ValueError(f"{self.path}: no column named {', '.join(sorted(unknown))}")
        self._csv.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()
