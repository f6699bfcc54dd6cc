"""Crash recovery: make the segments and the index agree again after a writer died (kill -9, power loss) or a
segment file was damaged, without ever losing an intact episode.

The index is the truth about which episodes are in the buffer (an episode is in once its rows are
committed). On opening for writing:

* a closed segment whose rewrite was committed but not yet renamed into place is rolled forward, and a
  missing metadata.yaml is rebuilt from the index;
* a closed segment whose file no longer is what was closed (missing, another size, no footer: cut short or
  overwritten) is damaged: its original bytes go to quarantine/ first, then it is treated as an open one;
* an open segment (the one being written when the writer died) has no footer, may end inside a record
  and may hold messages of episodes that were never committed. Each committed episode is read at its
  indexed positions (its chunks' CRCs checked, and where no CRC covers a message, the message decoded and
  compared with its row: `salvage`); every readable one is copied into a fresh segment file that gets a footer
  and metadata.yaml, and the index is pointed at the new positions in one transaction (which also drops the
  unreadable episodes, numbering later transitions down), then the file is renamed into place. The
  uncommitted rest (a partial episode) is dropped whole. When a committed episode could not be read, the
  original file is kept in quarantine/ (see `user.buffer.repair.quarantine`) before anything replaces it. An open
  segment with no committed episode is removed.

Each segment that lost or kept episodes gets one log line saying which; `RecoveryReport` holds the same.
Every step can itself be interrupted by a crash and simply runs again on the next open.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.commit import FaultHook
from user.buffer.config import StorageConfig
from user.buffer.disk.directory import SEGMENTS_DIR, segment_path
from user.buffer.disk.mcapscan import has_footer, scan_file
from user.buffer.disk.metadata import METADATA_FILE, fsync_dir, write_metadata
from user.buffer.disk.segment_schemas import segment_codec
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import EVENT_TOPIC, TRANSITION_TOPIC, SegmentStats, segment_metadata
from user.buffer.errors import BufferIndexError
from user.buffer.index import Index
from user.buffer.repair.quarantine import note, quarantine
from user.buffer.repair.salvage import Copied, copy_readable
from user.buffer.rows import SegmentRow, TransitionRow
from user.interfaces.codec import Codec
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.recovery")

RECOVERING_SUFFIX = ".recovering"
MAX_LISTED = 5  # unreadable episodes named one by one in a segment's log line


@dataclass
class RecoveryReport:
    """What recovery did."""

    rewritten: list[str] = field(default_factory=list)  # segments rewritten with their readable committed episodes
    removed: list[str] = field(default_factory=list)  # segments left with no committed episode
    rolled_forward: list[str] = field(default_factory=list)  # rewrites finished after an interrupted recovery
    metadata_rebuilt: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # closed segments whose file was missing, cut or changed
    quarantined: list[str] = field(default_factory=list)  # folders keeping the original bytes of damaged segments
    kept: dict[str, int] = field(default_factory=dict)  # segment -> committed episodes kept by its rewrite
    lost: dict[str, list[int]] = field(default_factory=dict)  # segment -> episodes (buffer numbers) unreadable

    @property
    def dropped_episodes(self) -> int:
        """Committed episodes whose data was unreadable or gone (power loss without fsync, damage)."""
        return sum(len(numbers) for numbers in self.lost.values())

    @property
    def changed(self) -> bool:
        return bool(self.rewritten or self.removed or self.rolled_forward or self.metadata_rebuilt)


@dataclass
class _Job:
    directory: Path
    index: Index
    codec: Codec
    config: StorageConfig
    report: RecoveryReport
    hook: FaultHook


def recover(
    directory: Path, index: Index, codec: Codec, config: StorageConfig, *, fault_hook: FaultHook | None = None
) -> RecoveryReport:
    """Reconcile every segment with the index (see the module docstring)."""
    report = RecoveryReport()
    job = _Job(directory, index, codec, config, report, fault_hook or (lambda _point: None))
    segments = index.segments()
    root = directory / SEGMENTS_DIR
    if not root.is_dir() and any(s.state == "closed" or s.episodes for s in segments):
        raise BufferIndexError(
            f"{root} is missing, yet the index lists {len(segments)} segments: restore it (to keep only the "
            f"segments that are there, rebuild the index with `user buffer reindex {directory}`)"
        )
    for seg in segments:
        path = segment_path(directory, seg.name)
        tmp = path.with_name(path.name + RECOVERING_SUFFIX)
        if seg.state == "closed":
            _settle_closed(seg, path, tmp, job)
        else:
            if tmp.exists():
                tmp.unlink()  # an earlier recovery died before committing: start it again
            _recover_open(seg, path, tmp, job)
    if report.changed:
        _log.warning(
            "recovered %s: rewrote %s, removed %s, rolled forward %s, dropped %d unreadable episodes%s",
            directory,
            report.rewritten or "none",
            report.removed or "none",
            report.rolled_forward or "none",
            report.dropped_episodes,
            f"; original bytes kept in {report.quarantined}" if report.quarantined else "",
        )
    return report


def _settle_closed(seg: SegmentRow, path: Path, tmp: Path, job: _Job) -> None:
    if tmp.exists():
        os.replace(tmp, path)
        fsync_dir(path.parent)
        job.report.rolled_forward.append(seg.name)
    problem = closed_segment_problem(seg, path)
    if problem is not None:
        _log.error("segment %s: %s; keeping its readable episodes", seg.name, problem)
        job.report.damaged.append(seg.name)
        kept_in = ""
        if path.exists():  # its bytes first, then mark it open: a crash from here on recovers it as an open one
            kept_in = _quarantine(seg, path, job, [f"segment {seg.name} was closed, but {problem}"])
        job.index.reopen_segment(seg.id)
        _recover_open(seg, path, tmp, job, kept_in=kept_in)
        return
    if not (path.parent / METADATA_FILE).exists():
        write_metadata(path.parent, segment_metadata(path.name, stats_from_index(job.index, seg.id, path)))
        job.report.metadata_rebuilt.append(seg.name)


def closed_segment_problem(seg: SegmentRow, path: Path) -> str | None:
    """What is wrong with a closed segment's file, judged cheaply (its size and its footer); None if nothing."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"its file {path} is missing"
    if size != seg.bytes:
        return f"{path.name} holds {size} bytes, {seg.bytes} when it was closed"
    with open(path, "rb") as f:
        if not has_footer(f):
            return f"{path.name} does not end with a footer"
    return None


def stats_from_index(index: Index, segment_id: int, path: Path | None = None) -> SegmentStats:
    """A segment's message counts and time range from its index rows (its camera frames from its file `path`)."""
    stats = SegmentStats()
    for ep in index.episodes(segment_id):
        stats.add(EVENT_TOPIC, ep.start_wall_ns)
        stats.add(EVENT_TOPIC, ep.end_wall_ns)
    for row in index.transitions(segment_id=segment_id):
        stats.add(TRANSITION_TOPIC, row.wall_ns)
    if path is not None:
        scanned = scan_file(str(path))
        for m in scanned.messages:
            topic = scanned.topics.get(m.channel_id)
            if topic is not None and topic not in (EVENT_TOPIC, TRANSITION_TOPIC):
                stats.add(topic, m.log_time)
    return stats


def _remove_segment(seg: SegmentRow, path: Path, index: Index, report: RecoveryReport) -> None:
    if path.parent.exists():  # files first: a crash in between leaves a row without files, removed next time
        shutil.rmtree(path.parent)
        fsync_dir(path.parent.parent)
    index.delete_segment(seg.id)
    report.removed.append(seg.name)


def _quarantine(seg: SegmentRow, path: Path, job: _Job, why: list[str]) -> str:
    folder = quarantine(job.directory, seg.name, [path], why)
    shown = str(folder.relative_to(job.directory))
    job.report.quarantined.append(shown)
    return shown


def _recover_open(seg: SegmentRow, path: Path, tmp: Path, job: _Job, *, kept_in: str = "") -> None:
    """Rewrite a segment with its readable committed episodes; `kept_in`: where its original bytes already are."""
    index, report = job.index, job.report
    episodes = index.episodes(seg.id)
    if not episodes or not path.exists():
        if episodes:
            _log.error("segment %s: file %s is missing; its %d episodes are lost", seg.name, path, len(episodes))
            report.lost[seg.name] = [e.episode for e in episodes]
        _remove_segment(seg, path, index, report)
        return
    rows: dict[int, list[TransitionRow]] = {}
    for row in index.transitions(segment_id=seg.id):
        rows.setdefault(row.episode, []).append(row)
    chunk_bytes = max(1024, int(job.config.chunk_mb * 1024 * 1024))
    codec = segment_codec(path, job.codec, salvage=True)  # the copy keeps the definitions its records were written with
    writer = SegmentWriter(tmp, codec, chunk_bytes=chunk_bytes, fsync_episodes=False, fsync_close=True)
    copy = copy_readable(path, episodes, rows, writer, codec)
    _account(seg, path, len(episodes), copy, job, kept_in=kept_in)
    if not copy.events:
        writer.abandon()
        tmp.unlink()
        _remove_segment(seg, path, index, report)
        return
    stats = writer.finish()
    job.hook("recover:rewritten")
    index.move_segment(seg.id, copy.rows, copy.events, os.path.getsize(tmp), now_ns(), dropped=list(copy.lost))
    job.hook("recover:indexed")
    os.replace(tmp, path)
    fsync_dir(path.parent)
    write_metadata(path.parent, segment_metadata(path.name, stats))
    report.rewritten.append(seg.name)
    report.kept[seg.name] = len(copy.events)


def _account(seg: SegmentRow, path: Path, committed: int, copy: Copied, job: _Job, *, kept_in: str) -> None:
    """Keep the original bytes of a segment that lost episodes (before anything replaces them; unless `kept_in`
    already holds them) and say, in one line, what was kept and what not."""
    report = job.report
    if not copy.lost:
        _log.warning(
            "segment %s: kept all %d committed episodes (%d transitions)", seg.name, committed, copy.transitions
        )
        return
    report.lost[seg.name] = list(copy.lost)
    listed = "; ".join(f"episode {ep}: {why}" for ep, why in list(copy.lost.items())[:MAX_LISTED])
    more = f"; and {len(copy.lost) - MAX_LISTED} more" if len(copy.lost) > MAX_LISTED else ""
    line = (
        f"segment {seg.name}: kept {len(copy.events)} of {committed} committed episodes ({copy.transitions} "
        f"transitions); lost {len(copy.lost)} unreadable: {listed}{more}"
    )
    if kept_in:
        note(job.directory / kept_in, [line])
    else:
        kept_in = _quarantine(seg, path, job, [line])
    _log.error("%s; original bytes kept in %s", line, kept_in)
