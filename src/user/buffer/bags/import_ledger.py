"""The record of the bags imported into a buffer directory (`imports.json` beside the index).

A bag is known by the digest of its messages (`BagReader.digest`), so importing it again, from any path or
copy, is recognised. A record is written before the first episode of an import is committed ("committing")
and marked "done" after the last: a record still "committing" is an import that was interrupted (kill, disk
full) and that the same command finishes. Episode ids of a record stay reserved for its robot even while
some of its episodes are not stored yet. The file is replaced atomically (write, fsync, rename).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from user.buffer.disk.metadata import fsync_dir
from user.buffer.errors import BufferError

LEDGER_FILE = "imports.json"
LEDGER_FORMAT = 1
STATES = ("committing", "done")


class LedgerError(BufferError):
    """The record of imported bags cannot be read or written."""


@dataclass(frozen=True)
class ImportRecord:
    """One bag imported (or being imported) into the buffer."""

    digest: str  # SHA-256 of the bag's messages
    bag: str  # where it was imported from (for people; the digest identifies it)
    robot_id: str
    first_episode_id: int
    episodes: int
    transitions: int
    as_demos: bool
    mapping_digest: str  # SHA-256 of the mapping and --as-demos it was converted with
    state: Literal["committing", "done"]
    started_ns: int
    finished_ns: int = 0

    @property
    def episode_ids(self) -> range:
        return range(self.first_episode_id, self.first_episode_id + self.episodes)


_FIELD_TYPES = {f.name: f.type for f in dataclasses.fields(ImportRecord)}
_PY_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "bool": bool}


def _record(item: Any, where: str) -> ImportRecord:
    if not isinstance(item, dict) or set(item) != set(_FIELD_TYPES):
        raise LedgerError(f"{where}: a record needs exactly the keys {', '.join(_FIELD_TYPES)}")
    for name, value in item.items():
        expected = _PY_TYPES.get(str(_FIELD_TYPES[name]), str)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise LedgerError(f"{where}: {name} is {value!r}, not of type {_FIELD_TYPES[name]}")
    if item["state"] not in STATES:
        raise LedgerError(f"{where}: state {item['state']!r} is not one of {', '.join(STATES)}")
    if min(item["first_episode_id"], item["episodes"], item["transitions"]) < 0:
        raise LedgerError(f"{where}: negative episode id or count")
    return ImportRecord(**item)


class ImportLedger:
    """Read and update `imports.json` of one buffer directory (whose writer lock the caller holds)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LEDGER_FILE
        self._records: dict[str, ImportRecord] = {r.digest: r for r in self._load()}

    def _load(self) -> list[ImportRecord]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise LedgerError(f"{self.path}: cannot read the record of imported bags ({exc})") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LedgerError(f"{self.path}: not JSON ({exc}); the record of imported bags is damaged") from exc
        if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT or not isinstance(data.get("bags"), list):
            raise LedgerError(f"{self.path}: not a record of imported bags of format {LEDGER_FORMAT}")
        return [_record(item, f"{self.path}: bags[{k}]") for k, item in enumerate(data["bags"])]

    def find(self, digest: str) -> ImportRecord | None:
        return self._records.get(digest)

    def records(self) -> list[ImportRecord]:
        return sorted(self._records.values(), key=lambda r: r.started_ns)

    def next_episode_id(self, robot_id: str) -> int:
        """The first episode id above every id an import has reserved for `robot_id` (0 if none)."""
        ends = [r.episode_ids.stop for r in self._records.values() if r.robot_id == robot_id]
        return max(ends, default=0)

    def put(self, record: ImportRecord) -> None:
        """Add or replace the record of `record.digest`, durably."""
        records = {**self._records, record.digest: record}
        body = {"format": LEDGER_FORMAT, "bags": [dataclasses.asdict(r) for r in records.values()]}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(body, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise LedgerError(f"{self.path}: cannot write the record of imported bags ({exc})") from exc
        self._records = records
