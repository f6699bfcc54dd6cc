"""Crash recovery: make the segments and the index agree again after a writer died (kill -9, power loss).

The index is the truth about which episodes are in the buffer (an episode is in once its rows are
committed). On opening for writing:

* a closed segment whose rewrite was committed but not yet renamed into place is rolled forward, and a
  missing metadata.yaml is rebuilt from the index;
* an open segment (the one being written when the writer died) has no footer, may end inside a record
  and may hold messages of episodes that were never committed. Its committed episodes are copied, by
  their indexed positions, into a fresh segment file that gets a proper footer and metadata.yaml; the
  index is pointed at the new positions in one transaction, then the file is renamed into place. The
  uncommitted rest (a partial episode) is dropped whole. An open segment with no committed episode is
  removed.

Every step can itself be interrupted by a crash and simply runs again on the next open.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.config import StorageConfig
from user.buffer.errors import SegmentError
from user.buffer.index import EpisodeRow, Index, SegmentRow, TransitionRow
from user.buffer.metadata import METADATA_FILE, fsync_dir, write_metadata
from user.buffer.segments import (
    EVENT_TOPIC,
    TRANSITION_TOPIC,
    OutMessage,
    Position,
    SegmentReader,
    SegmentStats,
    SegmentWriter,
    segment_metadata,
)
from user.buffer.storage import segment_path
from user.buffer.writer import FaultHook
from user.interfaces.codec import Codec
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.recovery")

RECOVERING_SUFFIX = ".recovering"


@dataclass
class RecoveryReport:
    """What recovery did."""

    rewritten: list[str] = field(default_factory=list)  # open segments given a footer (committed episodes kept)
    removed: list[str] = field(default_factory=list)  # open segments with no committed episode
    rolled_forward: list[str] = field(default_factory=list)  # rewrites finished after an interrupted recovery
    metadata_rebuilt: list[str] = field(default_factory=list)
    dropped_episodes: int = 0  # committed episodes whose data was unreadable (power loss without fsync)

    @property
    def changed(self) -> bool:
        return bool(self.rewritten or self.removed or self.rolled_forward or self.metadata_rebuilt)


def recover(
    directory: Path, index: Index, codec: Codec, config: StorageConfig, *, fault_hook: FaultHook | None = None
) -> RecoveryReport:
    """Reconcile every segment with the index (see the module docstring)."""
    report = RecoveryReport()
    job = _Job(index, codec, config, report, fault_hook or (lambda _point: None))
    for seg in index.segments():
        path = segment_path(directory, seg.name)
        tmp = path.with_name(path.name + RECOVERING_SUFFIX)
        if seg.state == "closed":
            _settle_closed(seg, path, tmp, index, report)
        else:
            if tmp.exists():
                tmp.unlink()  # an earlier recovery died before committing: start it again
            _recover_open(seg, path, tmp, job)
    if report.changed:
        _log.warning(
            "recovered %s: rewrote %s, removed %s, rolled forward %s, dropped %d unreadable episodes",
            directory,
            report.rewritten or "none",
            report.removed or "none",
            report.rolled_forward or "none",
            report.dropped_episodes,
        )
    return report


def _settle_closed(seg: SegmentRow, path: Path, tmp: Path, index: Index, report: RecoveryReport) -> None:
    if tmp.exists():
        os.replace(tmp, path)
        fsync_dir(path.parent)
        report.rolled_forward.append(seg.name)
    if not (path.parent / METADATA_FILE).exists() and path.exists():
        write_metadata(path.parent, segment_metadata(path.name, stats_from_index(index, seg.id)))
        report.metadata_rebuilt.append(seg.name)


def stats_from_index(index: Index, segment_id: int) -> SegmentStats:
    """A segment's message counts and time range, from its index rows."""
    stats = SegmentStats()
    for ep in index.episodes(segment_id):
        stats.add(EVENT_TOPIC, ep.start_wall_ns)
        stats.add(EVENT_TOPIC, ep.end_wall_ns)
    for row in index.transitions(segment_id=segment_id):
        stats.add(TRANSITION_TOPIC, row.wall_ns)
    return stats


def _remove_segment(seg: SegmentRow, path: Path, index: Index, report: RecoveryReport) -> None:
    if path.parent.exists():  # files first: a crash in between leaves a row without files, removed next time
        shutil.rmtree(path.parent)
        fsync_dir(path.parent.parent)
    index.delete_segment(seg.id)
    report.removed.append(seg.name)


@dataclass
class _Job:
    index: Index
    codec: Codec
    config: StorageConfig
    report: RecoveryReport
    hook: FaultHook


def _recover_open(seg: SegmentRow, path: Path, tmp: Path, job: _Job) -> None:
    index, report = job.index, job.report
    episodes = index.episodes(seg.id)
    if not episodes or not path.exists():
        if episodes:
            _log.error("segment %s: file %s is missing; its %d episodes are lost", seg.name, path, len(episodes))
            report.dropped_episodes += len(episodes)
        _remove_segment(seg, path, index, report)
        return
    rows: dict[int, list[TransitionRow]] = {}
    for row in index.transitions(segment_id=seg.id):
        rows.setdefault(row.episode, []).append(row)
    chunk_bytes = max(1024, int(job.config.chunk_mb * 1024 * 1024))
    writer = SegmentWriter(tmp, job.codec, chunk_bytes=chunk_bytes, fsync_episodes=False, fsync_close=True)
    moved_rows: list[tuple[int, Position]] = []
    moved_events: list[tuple[int, Position, Position]] = []
    with SegmentReader(path) as reader:
        for ep in episodes:
            try:
                messages = _episode_messages(reader, ep, rows.get(ep.episode, []))
            except SegmentError as exc:
                dropped = [e for e in episodes if e.episode >= ep.episode]
                _log.error(
                    "segment %s: episode %d unreadable (%s); dropping it and %d later",
                    seg.name,
                    ep.episode,
                    exc,
                    len(dropped) - 1,
                )
                index.truncate_from_episode(ep.episode)
                report.dropped_episodes += len(dropped)
                break
            positions = writer.write_episode(messages)
            moved_events.append((ep.episode, positions[0], positions[-1]))
            moved_rows.extend((r.index, p) for r, p in zip(rows[ep.episode], positions[1:-1], strict=True))
    if not moved_events:
        writer.abandon()
        tmp.unlink()
        _remove_segment(seg, path, index, report)
        return
    stats = writer.finish()
    job.hook("recover:rewritten")
    index.move_segment(seg.id, moved_rows, moved_events, os.path.getsize(tmp), now_ns())
    job.hook("recover:indexed")
    os.replace(tmp, path)
    fsync_dir(path.parent)
    write_metadata(path.parent, segment_metadata(path.name, stats))
    report.rewritten.append(seg.name)


def _episode_messages(reader: SegmentReader, ep: EpisodeRow, rows: list[TransitionRow]) -> list[OutMessage]:
    if len(rows) != ep.steps:
        raise SegmentError(f"episode {ep.episode} has {len(rows)} transition rows, expected {ep.steps}")
    return [
        OutMessage(EVENT_TOPIC, reader.read(ep.start_event), ep.start_wall_ns),
        *(OutMessage(TRANSITION_TOPIC, reader.read(r.position), r.wall_ns) for r in rows),
        OutMessage(EVENT_TOPIC, reader.read(ep.end_event), ep.end_wall_ns),
    ]
