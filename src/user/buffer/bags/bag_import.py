"""Import a bag whole or not at all, and only once (`user buffer import-bag`).

1. The bag is identified by the digest of its messages; one already in the buffer's record of imports
   (`import_ledger`) is not imported again.
2. Every episode is converted and checked (`BagImporter`) into a staging file beside the index before
   anything is stored: a corrupt, non-finite or ill-fitting message anywhere ends the import with one error
   naming it, and the buffer is as it was.
3. The record is written ("committing"), the staged episodes are committed one by one, and the record is
   marked "done". An interruption in this step (kill, disk full) leaves the record "committing": the same
   command then stores the episodes still missing, under the same episode ids, and nothing twice.

The message definitions a bag carries decode it (`BagReader.codec`), so custom types need no .msg files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from user.buffer.bags.bagread import BagReader
from user.buffer.bags.import_ledger import ImportLedger, ImportRecord
from user.buffer.bags.importer import BagImporter, ImportMapping, ProgressCallback
from user.buffer.commit import FaultHook
from user.buffer.config import BufferConfig
from user.buffer.disk.segments import TRANSITION_TYPE
from user.buffer.errors import BufferError, MappingError
from user.buffer.replay import ReplayBuffer
from user.interfaces.codec import Codec, default_codec
from user.interfaces.domain import Transition, transition_from_msg, transition_to_msg
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.import")

STAGING_DIR = "import-staging"  # under the buffer directory; emptied by every import (under the writer lock)
_COUNT = struct.Struct("<Q")
STORING = "storing episodes"  # the step `_commit` reports


@dataclass(frozen=True)
class ImportResult:
    """What `import_bag` did: "imported" the bag, found it "already" imported (nothing done), or "resumed" an
    interrupted import of it (`already_stored` of its episodes had been stored before)."""

    outcome: Literal["imported", "already", "resumed"]
    record: ImportRecord
    already_stored: int = 0
    skipped_steps: int = 0  # action messages before every observed topic had data
    same_mapping: bool = True  # for "already": the earlier import used the same mapping and --as-demos


def mapping_digest(mapping: ImportMapping, as_demos: bool) -> str:
    body = json.dumps({"mapping": dataclasses.asdict(mapping), "as_demos": as_demos}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


class _Staging:
    """Converted episodes in a file: per episode its transition count, then each transition's CDR length and
    bytes (as the writer stores them)."""

    def __init__(self, path: Path, codec: Codec) -> None:
        self.path = path
        self.codec = codec
        self.episodes = self.transitions = 0

    def write(self, f: BinaryIO, episode: list[Transition]) -> None:
        f.write(_COUNT.pack(len(episode)))
        for t in episode:
            payload = self.codec.encode(transition_to_msg(t, self.codec))
            f.write(_COUNT.pack(len(payload)))
            f.write(payload)
        self.episodes += 1
        self.transitions += len(episode)

    def read(self) -> Iterator[list[tuple[Transition, bytes]]]:
        with open(self.path, "rb") as f:
            for _ in range(self.episodes):
                (count,) = _COUNT.unpack(f.read(_COUNT.size))
                episode = []
                for _ in range(count):
                    (length,) = _COUNT.unpack(f.read(_COUNT.size))
                    payload = f.read(length)
                    episode.append((transition_from_msg(self.codec.decode(payload, TRANSITION_TYPE)), payload))
                yield episode


def _stage(
    reader: BagReader, importer: BagImporter, staging: _Staging, max_steps: int, progress: ProgressCallback | None
) -> None:
    """Convert and check every episode of the bag into `staging`; stores nothing."""
    staging.path.parent.mkdir(exist_ok=True)
    with open(staging.path, "wb") as f:
        for episode in importer.episodes(reader, progress):
            if len(episode) > max_steps:
                raise MappingError(
                    f"{reader.path}: episode {staging.episodes} has {len(episode)} steps, more than the buffer's "
                    f"storage.max_episode_steps={max_steps} (split it with episode_gap_s)"
                )
            staging.write(f, episode)


def _commit(buf: ReplayBuffer, staging: _Staging, record: ImportRecord, progress: ProgressCallback | None) -> int:
    """Store the staged episodes not stored yet; returns how many were stored before (an interrupted import)."""
    before = 0
    for n, episode in enumerate(staging.read()):
        if progress is not None:
            progress(STORING, n, staging.episodes)
        first = episode[0][0]
        if buf.has_episode(first.robot_id, first.episode_id):
            before += 1
            continue
        stored = None
        for transition, payload in episode:
            stored = buf.add(transition, wall_ns=transition.stamp_ns, payload=payload)
        if stored is None:
            raise BufferError(f"{record.bag}: episode {first.episode_id} of {first.robot_id} was not stored")
    if progress is not None:
        progress(STORING, staging.episodes, staging.episodes)
    return before


def _plan(buf: ReplayBuffer, ledger: ImportLedger, earlier: ImportRecord | None, fresh: ImportRecord) -> ImportRecord:
    """The record to import under: the interrupted one, if any (same mapping only), else `fresh` with the next
    free episode id of its robot."""
    if earlier is not None:
        if earlier.mapping_digest != fresh.mapping_digest:
            raise BufferError(
                f"{fresh.bag}: an interrupted import of this bag (episodes {earlier.first_episode_id}.."
                f"{earlier.episode_ids.stop - 1} of {earlier.robot_id}) used another mapping or --as-demos; "
                "run it with the same ones to finish it"
            )
        return earlier
    last = {r.robot_id: r.last_episode_id for r in buf.storage.index.robot_episodes()}.get(fresh.robot_id)
    stored = 0 if last is None else last + 1
    return dataclasses.replace(fresh, first_episode_id=max(stored, ledger.next_episode_id(fresh.robot_id)))


def import_bag(
    bag: str | Path,
    directory: str | Path,
    mapping: ImportMapping,
    *,
    as_demos: bool,
    config: BufferConfig | None = None,
    fault_hook: FaultHook | None = None,
    progress: ProgressCallback | None = None,
) -> ImportResult:
    """Import `bag` into the buffer in `directory` (created if missing), whole, once (see the module docstring);
    `progress` hears how far reading the bag and storing its episodes are."""
    reader = BagReader(bag)
    digest = reader.digest()
    base = default_codec()
    bag_codec = reader.codec(base, mapping.topics())
    config = config or BufferConfig(prefetch=0)
    fresh = ImportRecord(
        digest,
        str(reader.path),
        mapping.robot_id,
        0,
        0,
        0,
        as_demos,
        mapping_digest(mapping, as_demos),
        "committing",
        now_ns(),
    )
    with ReplayBuffer.open(directory, config, codec=base, fault_hook=fault_hook) as buf:
        ledger = ImportLedger(Path(directory))
        earlier = ledger.find(digest)
        if earlier is not None and earlier.state == "done":
            return ImportResult("already", earlier, same_mapping=earlier.mapping_digest == fresh.mapping_digest)
        record = _plan(buf, ledger, earlier, fresh)
        staging_dir = Path(directory) / STAGING_DIR
        shutil.rmtree(staging_dir, ignore_errors=True)  # what an earlier import left when it was killed
        staging = _Staging(staging_dir / f"{digest}.part", base)
        importer = BagImporter(mapping, bag_codec, as_demos=as_demos, first_episode_id=record.first_episode_id)
        try:
            _stage(reader, importer, staging, config.storage.max_episode_steps, progress)
            staged = dataclasses.replace(record, episodes=staging.episodes, transitions=staging.transitions)
            if earlier is not None and (staged.episodes, staged.transitions) != (earlier.episodes, earlier.transitions):
                raise BufferError(
                    f"{reader.path}: converts to {staged.episodes} episodes ({staged.transitions} transitions), "
                    f"its interrupted import to {earlier.episodes} ({earlier.transitions}); nothing more stored"
                )
            ledger.put(staged)
            before = _commit(buf, staging, staged, progress)
            done = dataclasses.replace(staged, state="done", finished_ns=now_ns())
            ledger.put(done)
        finally:
            shutil.rmtree(staging_dir, ignore_errors=True)
    outcome: Literal["imported", "resumed"] = "resumed" if earlier is not None else "imported"
    return ImportResult(outcome, done, already_stored=before, skipped_steps=importer.skipped_steps)
