"""`user buffer reindex DIR`: rebuild the index from the segment files alone (when it was deleted or damaged).

Every whole episode of every segment (see `user.buffer.repair.segment_episodes`) gets its rows again, the fields taken
from its stored transitions and episode events, numbered in segment order. The new index is built beside the old
one (`index.sqlite3.rebuild`) and renamed into place only when complete; the old index files, if any, are moved
to quarantine/, never deleted. A segment that is unfinished (no footer) or had parts that could not be read is
indexed as open, so the next open for writing rewrites it with its whole episodes (its original bytes are kept in
quarantine/ first when parts were unreadable). Leftovers of an interrupted recovery (`*.recovering`) are moved to
quarantine/ too: without the index that committed them they cannot be trusted.

Needs the buffer's writer lock: nothing may write while the index is rebuilt. Readers that have the old index open
keep reading it; reopen them afterwards.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from user.buffer.disk.directory import SEGMENT_NAME, SEGMENTS_DIR, lock_directory, segment_path
from user.buffer.disk.metadata import fsync_dir
from user.buffer.errors import BufferError
from user.buffer.index import INDEX_FILE, Index
from user.buffer.repair.quarantine import quarantine
from user.buffer.repair.recovery import RECOVERING_SUFFIX
from user.buffer.repair.segment_episodes import FoundEpisode, SegmentEpisodes, segment_episodes
from user.buffer.rows import EpisodeRow
from user.interfaces.codec import Codec, default_codec

_log = logging.getLogger("user.buffer.reindex")

REBUILD_SUFFIX = ".rebuild"
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")


@dataclass
class ReindexReport:
    """What the rebuilt index holds and what was left out."""

    directory: str
    segments: int = 0
    episodes: int = 0
    transitions: int = 0
    lines: list[str] = field(default_factory=list)  # one per segment: what it holds, what was left out
    open_segments: list[str] = field(default_factory=list)  # rewritten with their whole episodes on the next open
    left_out: list[str] = field(default_factory=list)  # folders under segments/ that are no segment
    quarantined: list[str] = field(default_factory=list)  # folders keeping the old index and other replaced files

    @property
    def complete(self) -> bool:
        """Every segment file read whole, nothing left out."""
        return not self.open_segments and not self.left_out

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def reindex(directory: Path, codec: Codec | None = None) -> ReindexReport:
    """Rebuild the index of buffer `directory` from its segments (see the module docstring)."""
    root = directory / SEGMENTS_DIR
    if not root.is_dir():
        raise BufferError(f"{directory}: no {SEGMENTS_DIR}/ folder here, nothing to rebuild an index from")
    lock_fd = lock_directory(directory)
    try:
        return _rebuild(directory, codec or default_codec())
    finally:
        os.close(lock_fd)


def _rebuild(directory: Path, codec: Codec) -> ReindexReport:
    report = ReindexReport(str(directory))
    tmp_name = INDEX_FILE + REBUILD_SUFFIX
    for suffix in _SQLITE_SIDE_FILES:  # what an interrupted rebuild left
        (directory / (tmp_name + suffix)).unlink(missing_ok=True)
    index = Index(directory, file_name=tmp_name, durable=False, fresh=True)
    try:
        for folder in sorted((directory / SEGMENTS_DIR).iterdir()):
            if folder.is_dir() and SEGMENT_NAME.fullmatch(folder.name):
                _add_segment(index, directory, folder.name, codec, report)
            else:
                report.left_out.append(folder.name)
                report.lines.append(f"{SEGMENTS_DIR}/{folder.name}: not a segment, left alone")
        index.make_self_contained()  # one file to rename
    finally:
        index.close()
    with open(directory / tmp_name, "rb+") as f:
        os.fsync(f.fileno())
    old = [directory / (INDEX_FILE + s) for s in _SQLITE_SIDE_FILES if (directory / (INDEX_FILE + s)).exists()]
    if old:
        why = [f"the index as it was before `user buffer reindex {directory}` replaced it"]
        report.quarantined.append(_shown(directory, quarantine(directory, "index", old, why, move=True)))
    os.replace(directory / tmp_name, directory / INDEX_FILE)
    fsync_dir(directory)
    _log.info(
        "reindexed %s: %d transitions, %d episodes in %d segments",
        directory,
        report.transitions,
        report.episodes,
        report.segments,
    )
    return report


def _shown(directory: Path, folder: Path) -> str:
    return str(folder.relative_to(directory))


def _add_segment(index: Index, directory: Path, name: str, codec: Codec, report: ReindexReport) -> None:
    path = segment_path(directory, name)
    leftovers = [p for p in path.parent.iterdir() if p.name.endswith(RECOVERING_SUFFIX)]
    if leftovers:
        why = ["a rewrite by an interrupted recovery, which only the old index could say was committed"]
        report.quarantined.append(_shown(directory, quarantine(directory, name, leftovers, why, move=True)))
    if not path.is_file():
        report.left_out.append(name)
        report.lines.append(f"{SEGMENTS_DIR}/{name}: no {path.name}, left alone")
        return
    found = segment_episodes(path, codec)
    seg = index.add_segment(name, found.first_wall_ns or 0)
    size = path.stat().st_size
    for ep in found.episodes:
        _commit(index, seg.id, ep, size)
        report.transitions += len(ep.rows)
    report.segments += 1
    report.episodes += len(found.episodes)
    if found.footer and not found.problems:
        index.close_segment(seg.id, size, found.last_wall_ns or 0)
        report.lines.append(f"segment {name}: {_held(found)}")
        return
    report.open_segments.append(name)
    state = "unfinished (no footer)" if not found.footer else "finished"
    line = f"segment {name}: {_held(found)}; {state}, indexed as open (rewritten on the next open for writing)"
    if found.problems:
        folder = quarantine(directory, name, [path], [line, *found.problems])
        report.quarantined.append(_shown(directory, folder))
        line += f"; left out: {'; '.join(found.problems)}; original bytes kept in {_shown(directory, folder)}"
    report.lines.append(line)


def _held(found: SegmentEpisodes) -> str:
    return f"{len(found.episodes)} episodes ({sum(len(ep.rows) for ep in found.episodes)} transitions)"


def _commit(index: Index, segment_id: int, ep: FoundEpisode, size: int) -> None:
    """Index one whole episode (one step or more) as the writer would have: the next numbers, the fields from its
    transitions and events."""
    first, number = index.next_numbers()
    rows = [
        dataclasses.replace(r, index=first + k, segment_id=segment_id, episode=number) for k, r in enumerate(ep.rows)
    ]
    episode = EpisodeRow(
        episode=number,
        segment_id=segment_id,
        robot_id=ep.robot_id,
        task=rows[0].task,
        episode_id=ep.episode_id,
        steps=len(rows),
        first_index=first,
        success=any(r.success for r in rows),
        episode_return=float(sum(r.reward for r in rows)),
        interventions=sum(1 for r in rows if r.intervened),
        is_demo=all(r.is_demo for r in rows),
        policy_version=max(r.policy_version for r in rows),
        start_wall_ns=ep.start_wall_ns,
        end_wall_ns=ep.end_wall_ns,
        start_event=ep.start,
        end_event=ep.end,
    )
    index.commit_episode(episode, rows, size)
