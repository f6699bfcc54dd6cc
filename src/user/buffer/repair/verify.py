"""`user buffer verify`: check the index against the segments, message by message.

* the index file itself is sound (SQLite's quick_check: pages, records, constraints);
* every index row is numbered contiguously, belongs to a known episode and segment, and its episode's steps
  run 0..steps-1; no robot's episode is stored twice;
* every indexed position holds a whole MCAP message record that decodes as the transition the row
  describes (robot, episode, step, demo flag) and is followed by the camera frames it waits for (their
  cameras and stamps: `camera_topics`), a step stored without its next frames is followed by its next step
  with the same cameras (`next_frames`), and every episode's START/END events decode;
* every segment file is read by an independent reader (`mcap`'s NonSeekingReader, which needs no footer)
  and holds at least the indexed messages and their frames (exactly that many once closed); closed segments
  have a version-5 metadata.yaml whose counts agree with the index and, for camera topics, with the file.
"""

from __future__ import annotations

import io
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcap.exceptions import McapError
from mcap.reader import NonSeekingReader

from user.buffer.disk.camera_topics import frame_count, read_frames
from user.buffer.disk.directory import SEGMENTS_DIR, segment_path
from user.buffer.disk.mcapscan import ScanError, WholeRecords
from user.buffer.disk.metadata import HUMBLE_VERSION, read_metadata
from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.buffer.disk.segment_schemas import segment_codec
from user.buffer.disk.segments import (
    EVENT_TOPIC,
    EVENT_TYPE,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    SegmentReader,
    read_within,
)
from user.buffer.errors import BagReadError, SegmentError, reindex_hint
from user.buffer.index import Index
from user.buffer.rows import EpisodeRow, SegmentRow, TransitionRow
from user.interfaces.codec import Codec, DecodeError
from user.interfaces.domain import transition_from_msg

_log = logging.getLogger("user.buffer.verify")
MAX_PROBLEMS = 100


@dataclass
class VerifyReport:
    """Problems found (empty when the buffer is consistent) and what was checked."""

    transitions: int = 0
    episodes: int = 0
    segments: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append("... (further problems not listed)")


def verify(directory: Path, index: Index, codec: Codec, *, decode: bool = True) -> VerifyReport:
    """Check `directory` (see the module docstring); never modifies anything."""
    report = VerifyReport()
    seg_root = directory / SEGMENTS_DIR
    # Listed before the snapshot: a writer commits a segment's row before making its directory, so a
    # directory seen here always has its row in the snapshot, even while that writer runs.
    on_disk = sorted(p.name for p in seg_root.iterdir()) if seg_root.is_dir() else []
    with index.snapshot():
        sound = index.quick_check()
        segments = {s.id: s for s in index.segments()}
        episodes = index.episodes()
        rows = index.transitions()
    report.transitions, report.episodes, report.segments = len(rows), len(episodes), len(segments)
    if sound != ["ok"]:
        found = "; ".join(sound[:3])
        report.problem(f"{index.path} is damaged ({found}); {reindex_hint(directory)}")
    _check_rows(rows, episodes, segments, report)
    known = {s.name for s in segments.values()}
    for name in on_disk:
        if name not in known:
            report.problem(f"segments/{name} is not in the index (left over; not part of the buffer)")
    by_segment: dict[int, list[TransitionRow]] = {}
    for row in rows:
        by_segment.setdefault(row.segment_id, []).append(row)
    eps_by_segment: dict[int, list[EpisodeRow]] = {}
    for ep in episodes:
        eps_by_segment.setdefault(ep.segment_id, []).append(ep)
    for seg in segments.values():
        path = segment_path(directory, seg.name)
        seg_rows, seg_eps = by_segment.get(seg.id, []), eps_by_segment.get(seg.id, [])
        if not path.exists():
            if seg_rows or seg.state == "closed":
                report.problem(f"segment {seg.name}: file {path} is missing")
            continue
        frames = _check_positions(path, seg_rows, seg_eps, codec, report) if decode else None
        _check_segment_file(seg, path, len(seg_rows), 2 * len(seg_eps), report, frames=frames)
    return report


def _check_rows(
    rows: list[TransitionRow], episodes: list[EpisodeRow], segments: dict[int, SegmentRow], report: VerifyReport
) -> None:
    """Transition rows against their numbering, their episodes and their segments."""
    for n, row in enumerate(rows):
        if row.index != n:
            report.problem(f"transition numbers jump from {n - 1} to {row.index}")
            break
    _check_row_owners(rows, {e.episode: e for e in episodes}, segments, report)
    _check_episode_steps(rows, episodes, report)
    _check_unique_episodes(episodes, report)
    per_segment = Counter(e.segment_id for e in episodes)
    for seg in segments.values():
        n_eps = per_segment.get(seg.id, 0)
        if n_eps != seg.episodes:
            report.problem(f"segment {seg.name}: counts {seg.episodes} episodes, the index holds {n_eps}")


def _check_row_owners(
    rows: list[TransitionRow], eps: dict[int, EpisodeRow], segments: dict[int, SegmentRow], report: VerifyReport
) -> None:
    """Each row names an indexed episode it agrees with and an indexed segment."""
    for row in rows:
        ep = eps.get(row.episode)
        if ep is None:
            report.problem(f"transition {row.index}: episode {row.episode} is not in the index")
        elif row.segment_id != ep.segment_id or row.robot_id != ep.robot_id or row.episode_id != ep.episode_id:
            report.problem(f"transition {row.index}: disagrees with its episode {row.episode}")
        if row.segment_id not in segments:
            report.problem(f"transition {row.index}: segment {row.segment_id} is not in the index")


def _check_episode_steps(rows: list[TransitionRow], episodes: list[EpisodeRow], report: VerifyReport) -> None:
    """Each episode's rows hold its steps 0..n-1, in order."""
    steps: dict[int, list[int]] = {}
    for row in rows:
        steps.setdefault(row.episode, []).append(row.step)
    for ep in episodes:
        got = steps.get(ep.episode, [])
        if got != list(range(ep.steps)):
            report.problem(f"episode {ep.episode}: {ep.steps} steps expected, rows hold steps {got[:5]}...")


def _check_unique_episodes(episodes: list[EpisodeRow], report: VerifyReport) -> None:
    """Each robot's episode is stored once (a robot that restarted its episode ids, a bag imported twice)."""
    stored: dict[tuple[str, int], list[int]] = {}
    for ep in episodes:
        stored.setdefault((ep.robot_id, ep.episode_id), []).append(ep.episode)
    for (robot, episode_id), numbers in stored.items():
        if len(numbers) > 1:
            report.problem(f"robot {robot}'s episode {episode_id} is stored {len(numbers)} times (episodes {numbers})")


def _check_positions(
    path: Path, rows: list[TransitionRow], episodes: list[EpisodeRow], codec: Codec, report: VerifyReport
) -> int:
    """Check each indexed message of one segment; returns how many camera frames its records wait for."""
    size = path.stat().st_size
    frames = 0
    codec = segment_codec(path, codec, salvage=True)  # verify reports what does not decode, record by record
    with SegmentReader(path) as reader:
        elided: tuple[TransitionRow, list[str]] | None = None  # the row before, if its next frames are in this one
        for row in rows:
            try:
                msg = codec.decode(read_within(reader, row.position, size), TRANSITION_TYPE)
            except (SegmentError, DecodeError) as exc:
                report.problem(f"transition {row.index}: {exc}")
                elided = None
                continue
            got = (str(msg.robot_id), int(msg.episode_id), int(msg.step), bool(msg.is_demo))
            if got != (row.robot_id, row.episode_id, row.step, row.is_demo):
                report.problem(f"transition {row.index}: the segment holds {got}, the index says {row}")
            frames += _check_frames(reader, row, msg, codec, report)
            if elided is not None:
                _check_successor(*elided, row, msg, report)
            elided = (row, _cameras(msg.next_observation)) if _is_elided(msg) else None
        if elided is not None:
            report.problem(f"transition {elided[0].index}: its next images are in the next step, which is not stored")
        for ep in episodes:
            for kind, position in ((0, ep.start_event), (1, ep.end_event)):
                try:
                    event = codec.decode(read_within(reader, position, size), EVENT_TYPE)
                except (SegmentError, DecodeError) as exc:
                    report.problem(f"episode {ep.episode}: event: {exc}")
                    continue
                if int(event.kind) != kind or int(event.episode_id) != ep.episode_id:
                    report.problem(
                        f"episode {ep.episode}: event at {position.offset} is not its {('START', 'END')[kind]}"
                    )
    return frames


def _check_frames(reader: SegmentReader, row: TransitionRow, msg: Any, codec: Codec, report: VerifyReport) -> int:
    """The camera frames after transition `row`'s record are the ones it waits for; returns how many it waits for."""
    try:
        t = transition_from_msg(msg)
    except (ValueError, TypeError) as exc:
        report.problem(f"transition {row.index}: does not convert ({exc})")
        return 0
    count = frame_count(t)
    if count:
        try:
            read_frames(reader, row.position, t, codec, f"transition {row.index}")
        except SegmentError as exc:  # CorruptRecordError, TruncatedSegmentError
            report.problem(f"transition {row.index}: its camera frames: {exc}")
    return count


def _is_elided(msg: Any) -> bool:
    return any(str(img.format) == IN_NEXT_STEP for img in msg.next_observation.images)


def _cameras(obs: Any) -> list[str]:
    return [str(img.header.frame_id) for img in obs.images]


def _check_successor(
    row: TransitionRow, cameras: list[str], successor: TransitionRow, msg: Any, report: VerifyReport
) -> None:
    """The record after an elided step (`user.buffer.disk.next_frames`) must be its next step, with the same cameras."""
    if (successor.episode, successor.step) != (row.episode, row.step + 1):
        report.problem(
            f"transition {row.index}: its next images are in the next step, but the record after it is "
            f"episode {successor.episode} step {successor.step}"
        )
    elif _cameras(msg.observation) != cameras:
        report.problem(
            f"transition {row.index}: its next images are cameras {cameras}, the next step holds "
            f"{_cameras(msg.observation)}"
        )


def count_messages(path: Path) -> tuple[Counter[str], str | None]:
    """Messages per topic read by `mcap`'s NonSeekingReader (which needs no footer), up to the last whole
    record, and why reading stopped before the footer (None: it reached the footer)."""
    counts: Counter[str] = Counter()
    with open(path, "rb") as f:
        try:
            whole = WholeRecords(f)
        except ScanError as exc:
            return counts, str(exc)
        reader = NonSeekingReader(io.BufferedReader(whole), record_size_limit=max(whole.end, 1))
        try:
            for _, channel, _ in reader.iter_messages(log_time_order=False):
                counts[channel.topic] += 1
        except (McapError, EOFError, ValueError, OSError) as exc:
            return counts, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return counts, None


def _check_segment_file(
    seg: SegmentRow, path: Path, transitions: int, events: int, report: VerifyReport, *, frames: int | None
) -> None:
    """The file's messages per topic against the index (`frames`: camera frames its records wait for, if known)
    and, once closed, its metadata.yaml against both."""
    counts, cut = count_messages(path)
    closed = seg.state == "closed"
    if closed and cut is not None:
        report.problem(f"segment {seg.name}: closed, but {path.name} does not read to its end ({cut})")
    cameras = {topic: n for topic, n in counts.items() if topic not in (TRANSITION_TOPIC, EVENT_TOPIC)}
    found = sum(cameras.values())
    if frames is not None and (found < frames or (closed and found != frames)):
        report.problem(f"segment {seg.name}: {found} camera frames in {path.name}, its records wait for {frames}")
    for topic, indexed in ((TRANSITION_TOPIC, transitions), (EVENT_TOPIC, events)):
        found = counts.get(topic, 0)
        if found < indexed or (closed and found != indexed):
            report.problem(f"segment {seg.name}: {found} {topic} messages in {path.name}, the index has {indexed}")
    if closed:
        _check_metadata(seg, path, transitions, events, report, cameras=cameras)


def _check_metadata(
    seg: SegmentRow, path: Path, transitions: int, events: int, report: VerifyReport, *, cameras: dict[str, int]
) -> None:
    """A closed segment's metadata.yaml: Humble's version, its file, and its counts (`cameras`: as in the file)."""
    try:
        meta = read_metadata(path.parent)
    except BagReadError as exc:
        report.problem(f"segment {seg.name}: {exc}")
        return
    if meta.version != HUMBLE_VERSION or meta.storage_identifier != "mcap":
        report.problem(f"segment {seg.name}: metadata.yaml declares version {meta.version}, {meta.storage_identifier}")
    if meta.relative_file_paths != (path.name,):
        report.problem(f"segment {seg.name}: metadata.yaml lists {meta.relative_file_paths}, expected {path.name}")
    declared = {t.name: t.message_count for t in meta.topics}
    if declared.get(TRANSITION_TOPIC) != transitions or declared.get(EVENT_TOPIC) != events:
        report.problem(f"segment {seg.name}: metadata.yaml counts {declared}, the index {transitions}/{events}")
    declared_cameras = {topic: n for topic, n in declared.items() if topic not in (TRANSITION_TOPIC, EVENT_TOPIC)}
    if declared_cameras != cameras:
        report.problem(f"segment {seg.name}: metadata.yaml counts camera frames {declared_cameras}, the file {cameras}")
