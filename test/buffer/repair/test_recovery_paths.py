"""Every path of `recover()` on its own, against segments left by a writer that died: what it keeps, what it
drops, and that its report (and its log) says both."""

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from mcap.reader import make_reader

from test.buffer.factories import episode
from test.buffer.fsyncs import record_fsyncs
from user.buffer.config import StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.disk.mcapscan import MESSAGE_PREFIX
from user.buffer.disk.metadata import METADATA_FILE, read_metadata
from user.buffer.disk.segments import EVENT_TOPIC, TRANSITION_TOPIC, TRANSITION_TYPE, SegmentReader
from user.buffer.errors import BufferIndexError
from user.buffer.index import Index
from user.buffer.repair.quarantine import QUARANTINE_DIR
from user.buffer.repair.recovery import (
    RECOVERING_SUFFIX,
    RecoveryReport,
    closed_segment_problem,
    recover,
    stats_from_index,
)
from user.buffer.repair.salvage import crc_verdicts
from user.buffer.storage import DiskStorage
from user.buffer.writer import EpisodeWriter
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_from_msg, transition_to_msg

CODEC = default_codec()
CONFIG = StorageConfig(cache_size=100, fsync="never", segment_max_episodes=10)
SEG0 = "seg_000000"
WRIST, FRONT = "/arm/wrist/image/compressed", "/arm/front/image/compressed"  # the test episodes' camera topics


class Crash(BaseException):
    """The writer's process dying at a fault point."""


def _crash_at(point: str, nth: int) -> Callable[[str], None]:
    """A fault hook that raises the `nth` time the writer reaches `point`."""
    seen = [0]

    def hook(name: str) -> None:
        if name == point:
            seen[0] += 1
            if seen[0] == nth:
                raise Crash(point)

    return hook


def _wire(t: Transition) -> bytes:
    return CODEC.encode(transition_to_msg(t, CODEC))


def _die(w: EpisodeWriter) -> None:
    """What kill -9 leaves: the open segment without a footer, nothing closed in the index."""
    if w._segment is not None:
        w._segment.abandon()
    w.storage.close()
    w.index.close()


def _written(
    directory: Path,
    episodes: int,
    hook: Callable[[str], None] | None = None,
    config: StorageConfig = CONFIG,
    first: int = 0,
) -> None:
    """`episodes` episodes of 3 steps written into one open segment by a writer that then died; an episode
    whose commit the hook interrupts is in the file but not in the index."""
    index = Index(directory, durable=False)
    w = EpisodeWriter(DiskStorage(directory, index, CODEC, config), config, fault_hook=hook)
    for e in range(first, first + episodes):
        with contextlib.suppress(Crash):
            w.add_episode(episode("arm", e, 3))
    _die(w)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Callable[[], Index]]:
    """Opens the buffer's index again (after the writer died), closed at the end of the test."""
    opened: list[Index] = []

    def open_index() -> Index:
        opened.append(Index(tmp_path, durable=False))
        return opened[-1]

    yield open_index
    for i in opened:
        i.close()


def _recover(tmp_path: Path, index: Index) -> RecoveryReport:
    return recover(tmp_path, index, CODEC, CONFIG)


def _episode_ids_readable(tmp_path: Path, index: Index) -> list[int]:
    """The robot episode ids of every indexed transition, each read from the position the index gives."""
    ids = []
    for seg in index.segments():
        with SegmentReader(segment_path(tmp_path, seg.name)) as reader:
            for row in index.transitions(segment_id=seg.id):
                t = transition_from_msg(CODEC.decode(reader.read(row.position), TRANSITION_TYPE))
                assert (t.episode_id, t.step) == (row.episode_id, row.step)
                ids.append(t.episode_id)
    return ids


def test_an_open_segment_is_rewritten_with_its_committed_episodes_and_a_footer(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 3)
    idx = index()
    with caplog.at_level(logging.WARNING, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(rewritten=[SEG0], kept={SEG0: 3})
    assert report.changed and f"rewrote ['{SEG0}']" in caplog.text
    assert f"segment {SEG0}: kept all 3 committed episodes (9 transitions)" in caplog.text
    assert not (tmp_path / QUARANTINE_DIR).exists()  # nothing committed was lost: nothing to keep aside
    [seg] = idx.segments()
    path = segment_path(tmp_path, SEG0)
    assert seg.state == "closed" and seg.bytes == os.path.getsize(path) and seg.closed_ns is not None
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()  # a footer and summary: the file is a finished MCAP
    assert summary is not None and summary.statistics is not None and summary.statistics.message_count == 3 * 13
    meta = read_metadata(path.parent)
    assert meta.message_count == 39 and {t.name: t.message_count for t in meta.topics} == {
        EVENT_TOPIC: 6,
        TRANSITION_TOPIC: 9,
        WRIST: 12,  # each step's frame and each episode's last next frame
        FRONT: 12,
    }
    assert _episode_ids_readable(tmp_path, idx) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not path.with_name(path.name + RECOVERING_SUFFIX).exists()
    assert _recover(tmp_path, idx) == RecoveryReport()  # once closed, a segment is left alone


def test_rows_after_an_uncommitted_episode_move_to_their_new_offsets(
    tmp_path: Path, index: Callable[[], Index]
) -> None:
    """The second episode was written to the file but its commit never happened: the rewrite leaves it out,
    so the third episode's messages sit earlier in the new file, and the index points there."""
    _written(tmp_path, 3, _crash_at("episode:written", 2))
    idx = index()
    before = {r.index: r.position for r in idx.transitions()}
    events_before = {e.episode: (e.start_event, e.end_event) for e in idx.episodes()}
    assert _recover(tmp_path, idx).rewritten == [SEG0]
    after = {r.index: r.position for r in idx.transitions()}
    assert sorted(after) == [0, 1, 2, 3, 4, 5]
    assert [after[i] == before[i] for i in range(6)] == [True] * 3 + [False] * 3
    assert all(after[i].offset < before[i].offset and after[i].length == before[i].length for i in (3, 4, 5))
    moved = {e.episode: (e.start_event, e.end_event) for e in idx.episodes()}
    assert moved[0] == events_before[0] and moved[1][0].offset < events_before[1][0].offset
    assert moved[1][1].offset < events_before[1][1].offset
    assert _episode_ids_readable(tmp_path, idx) == [0, 0, 0, 2, 2, 2]
    with SegmentReader(segment_path(tmp_path, SEG0)) as reader:  # the events, too, are where the index says
        for e in idx.episodes():
            assert reader.read(e.start_event) and reader.read(e.end_event)


def _quarantined(tmp_path: Path) -> tuple[Path, str]:
    """The one quarantine folder's segment file and why.txt."""
    [folder] = (tmp_path / QUARANTINE_DIR).iterdir()
    return folder / f"{SEG0}_0.mcap", (folder / "why.txt").read_text()


def test_an_unreadable_first_episode_is_dropped_and_every_later_one_kept(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 3)
    idx = index()
    first = idx.episodes()[0]
    path = segment_path(tmp_path, SEG0)
    with open(path, "r+b") as f:
        f.seek(first.start_event.offset)
        f.write(b"\xff")  # the record's opcode: no longer a message
    original = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    kept, why = _quarantined(tmp_path)
    assert report == RecoveryReport(
        rewritten=[SEG0], kept={SEG0: 2}, lost={SEG0: [0]}, quarantined=[str(kept.parent.relative_to(tmp_path))]
    )
    assert kept.read_bytes() == original and path.read_bytes() != original
    line = f"segment {SEG0}: kept 2 of 3 committed episodes (6 transitions); lost 1 unreadable: episode 0: "
    assert line in caplog.text and f"original bytes kept in {QUARANTINE_DIR}/{SEG0}-" in caplog.text
    assert why.startswith(line) and "opcode 0xff" in why
    assert "dropped 1 unreadable episodes; original bytes kept in ['quarantine/" in caplog.text
    assert idx.count() == (6, 2) and [r.index for r in idx.transitions()] == list(range(6))
    assert [e.first_index for e in idx.episodes()] == [0, 3]
    assert _episode_ids_readable(tmp_path, idx) == [1, 1, 1, 2, 2, 2]


def _set_byte(path: Path, offset: int, value: Callable[[int], int]) -> None:
    data = bytearray(path.read_bytes())
    data[offset] = value(data[offset])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("where", "value"), [(0, lambda _b: 0xFF), (MESSAGE_PREFIX + 40, lambda b: b ^ 0x10)])
def test_one_damaged_byte_inside_a_middle_episode_loses_that_episode_only(
    tmp_path: Path,
    index: Callable[[], Index],
    caplog: pytest.LogCaptureFixture,
    where: int,
    value: Callable[[int], int],
) -> None:
    """Issue 13, finding 5: one damaged byte in an open segment dropped the episode and every later one, and the
    file was rewritten without them and without a backup. Now every other episode is kept, the original bytes
    are in quarantine, and damage inside a payload (which still reads as a record) is found by the chunk's CRC."""
    _written(tmp_path, 8)
    idx = index()
    row = idx.transitions(start=10, stop=11)[0]  # episode 3, step 1
    path = segment_path(tmp_path, SEG0)
    _set_byte(path, row.offset + where, value)  # the record's opcode, or a bit in the middle of its payload
    original = path.read_bytes()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [3]} and report.kept == {SEG0: 7} and report.dropped_episodes == 1
    assert "lost 1 unreadable: episode 3: " in caplog.text and "do not match its CRC" in caplog.text
    assert _quarantined(tmp_path)[0].read_bytes() == original
    assert _episode_ids_readable(tmp_path, idx) == [e for e in (0, 1, 2, 4, 5, 6, 7) for _ in range(3)]
    assert idx.count() == (21, 7) and [r.index for r in idx.transitions()] == list(range(21))


def test_every_episode_unreadable_removes_the_segment_and_keeps_its_bytes(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 2)
    idx = index()
    path = segment_path(tmp_path, SEG0)
    with open(path, "r+b") as f:
        for ep in idx.episodes():
            f.seek(ep.end_event.offset)
            f.write(b"\xff")
    original = path.read_bytes()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.removed == [SEG0] and report.lost == {SEG0: [0, 1]} and report.kept == {}
    assert f"segment {SEG0}: kept 0 of 2 committed episodes (0 transitions); lost 2 unreadable" in caplog.text
    assert idx.segments() == [] and idx.count() == (0, 0) and not path.parent.exists()
    assert _quarantined(tmp_path)[0].read_bytes() == original


def test_a_segment_cut_inside_an_episode_keeps_the_ones_before_it(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 4)
    idx = index()
    second = idx.transitions(start=3, stop=4)[0]
    with open(segment_path(tmp_path, SEG0), "r+b") as f:
        f.truncate(second.offset + 5)  # the rest of the file never reached the disk
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert (report.rewritten, report.kept, report.lost) == ([SEG0], {SEG0: 1}, {SEG0: [1, 2, 3]})
    assert "lost 3 unreadable: episode 1: " in caplog.text and "truncated at byte" in caplog.text
    [seg] = idx.segments()
    assert (seg.state, seg.episodes, seg.transitions) == ("closed", 1, 3) and idx.count() == (3, 1)
    assert _episode_ids_readable(tmp_path, idx) == [0, 0, 0]


def test_an_episode_with_missing_transition_rows_is_dropped(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 2)
    idx = index()
    with idx.transaction() as db:
        db.execute("DELETE FROM transitions WHERE idx = 4")
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [1]} and report.rewritten == [SEG0]
    assert "episode 1 has 2 transition rows, expected 3" in caplog.text
    assert _episode_ids_readable(tmp_path, idx) == [0, 0, 0]


def test_a_missing_segment_file_reports_its_episodes_as_lost(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 2)
    segment_path(tmp_path, SEG0).unlink()
    idx = index()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(removed=[SEG0], lost={SEG0: [0, 1]})
    assert f"segment {SEG0}: file" in caplog.text and "is missing; its 2 episodes are lost" in caplog.text
    assert idx.segments() == [] and idx.count() == (0, 0)
    assert not segment_path(tmp_path, SEG0).parent.exists()


def test_an_open_segment_without_committed_episodes_is_removed_silently_as_lost_nothing(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 1, _crash_at("episode:written", 1))
    idx = index()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(removed=[SEG0]) and caplog.text == ""
    assert idx.segments() == [] and not segment_path(tmp_path, SEG0).parent.exists()


def test_an_interrupted_earlier_recovery_starts_again(tmp_path: Path, index: Callable[[], Index]) -> None:
    """A `.recovering` file beside an open segment is a rewrite that never committed: it is thrown away."""
    _written(tmp_path, 2)
    path = segment_path(tmp_path, SEG0)
    tmp = path.with_name(path.name + RECOVERING_SUFFIX)
    tmp.write_bytes(b"half a rewrite")
    idx = index()
    assert _recover(tmp_path, idx).rewritten == [SEG0]
    assert not tmp.exists() and _episode_ids_readable(tmp_path, idx) == [0, 0, 0, 1, 1, 1]


def test_a_committed_rewrite_of_a_closed_segment_is_rolled_forward(tmp_path: Path, index: Callable[[], Index]) -> None:
    """Recovery died after pointing the index at the rewritten file, before renaming it into place."""
    _written(tmp_path, 2, _crash_at("episode:written", 1))  # the file holds an uncommitted episode first
    idx = index()
    with pytest.raises(Crash):
        recover(tmp_path, idx, CODEC, CONFIG, fault_hook=_crash_at("recover:indexed", 1))
    path = segment_path(tmp_path, SEG0)
    assert path.with_name(path.name + RECOVERING_SUFFIX).exists() and idx.segments()[0].state == "closed"
    report = _recover(tmp_path, idx)
    assert report.rolled_forward == [SEG0] and report.changed
    assert not path.with_name(path.name + RECOVERING_SUFFIX).exists()
    assert _episode_ids_readable(tmp_path, idx) == [1, 1, 1]  # readable at the moved positions: the new file


def test_a_missing_metadata_file_is_rebuilt_from_the_index(tmp_path: Path, index: Callable[[], Index]) -> None:
    _written(tmp_path, 2)
    idx = index()
    _recover(tmp_path, idx)
    meta_path = segment_path(tmp_path, SEG0).parent / METADATA_FILE
    written = read_metadata(meta_path.parent)
    meta_path.unlink()
    report = _recover(tmp_path, idx)
    assert report == RecoveryReport(metadata_rebuilt=[SEG0]) and report.changed
    rebuilt = read_metadata(meta_path.parent)
    assert rebuilt.message_count == written.message_count == 10 + 16  # and 16 camera frames
    assert (rebuilt.starting_time_ns, rebuilt.duration_ns) == (written.starting_time_ns, written.duration_ns)
    assert {t.name: t.message_count for t in rebuilt.topics} == {t.name: t.message_count for t in written.topics}


def test_stats_from_the_index_count_both_events_and_every_transition(
    tmp_path: Path, index: Callable[[], Index]
) -> None:
    _written(tmp_path, 2)
    idx = index()
    stats = stats_from_index(idx, idx.segments()[0].id)
    assert stats.message_count == 10
    walls = [r.wall_ns for r in idx.transitions()] + [
        w for e in idx.episodes() for w in (e.start_wall_ns, e.end_wall_ns)
    ]
    assert stats.counts == {EVENT_TOPIC: 4, TRANSITION_TOPIC: 6}
    assert (stats.start_ns, stats.end_ns) == (min(walls), max(walls))


def test_nothing_to_do_changes_nothing_and_logs_nothing(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    idx = index()
    with caplog.at_level(logging.DEBUG, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport() and not report.changed and caplog.text == ""


def test_the_summary_line_names_each_segment_and_metadata_comes_from_its_own_rows(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    """A closed segment of two episodes whose metadata.yaml is gone beside an open one of one episode."""
    _written(tmp_path, 3, config=replace(CONFIG, segment_max_episodes=2))
    (segment_path(tmp_path, SEG0).parent / METADATA_FILE).unlink()
    idx = index()
    with caplog.at_level(logging.WARNING, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(rewritten=["seg_000001"], metadata_rebuilt=[SEG0], kept={"seg_000001": 1})
    summary = (
        f"recovered {tmp_path}: rewrote ['seg_000001'], removed none, rolled forward none, "
        "dropped 0 unreadable episodes"
    )
    assert summary in caplog.text.splitlines()[-1]
    meta = read_metadata(segment_path(tmp_path, SEG0).parent)
    assert meta.message_count == 2 * 13  # its own two episodes, not the open segment's
    assert {t.name: t.message_count for t in meta.topics} == {EVENT_TOPIC: 4, TRANSITION_TOPIC: 6, WRIST: 8, FRONT: 8}
    walls = [r.wall_ns for r in idx.transitions(stop=6)]
    assert meta.starting_time_ns == min(e.start_wall_ns for e in idx.episodes(idx.segments()[0].id))
    assert meta.starting_time_ns <= min(walls)


def _two_open_segments(tmp_path: Path) -> None:
    """Two writers that died one after the other, each with an open segment of one episode."""
    _written(tmp_path, 1)
    _written(tmp_path, 1, first=1)


def test_lost_episodes_add_up_over_segments(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _two_open_segments(tmp_path)
    paths = [segment_path(tmp_path, name) for name in (SEG0, "seg_000001")]
    for path in paths:
        path.unlink()
    idx = index()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(removed=[SEG0, "seg_000001"], lost={SEG0: [0], "seg_000001": [1]})
    for name, path in zip((SEG0, "seg_000001"), paths, strict=True):
        assert f"segment {name}: file {path} is missing; its 1 episodes are lost" in caplog.text


def test_missing_and_unreadable_episodes_add_up_over_segments(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    """One segment's file is gone, the other's only episode is damaged: both episodes are counted lost."""
    _two_open_segments(tmp_path)
    segment_path(tmp_path, SEG0).unlink()
    idx = index()
    start = idx.episodes(idx.segments()[1].id)[0].start_event
    with open(segment_path(tmp_path, "seg_000001"), "r+b") as f:
        f.seek(start.offset)
        f.write(b"\xff")
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.removed == [SEG0, "seg_000001"] and report.lost == {SEG0: [0], "seg_000001": [1]}
    assert report.dropped_episodes == 2 and len(report.quarantined) == 1
    assert "segment seg_000001: kept 0 of 1 committed episodes (0 transitions); lost 1 unreadable: episode 1: " in (
        caplog.text
    )


def test_an_episode_without_any_transition_rows_is_dropped_not_fatal(
    tmp_path: Path, index: Callable[[], Index]
) -> None:
    _written(tmp_path, 2)
    idx = index()
    with idx.transaction() as db:
        db.execute("DELETE FROM transitions WHERE episode = 1")
    report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [1]} and _episode_ids_readable(tmp_path, idx) == [0, 0, 0]


def test_the_rewritten_file_is_made_durable_once_when_it_is_finished(
    tmp_path: Path, index: Callable[[], Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(tmp_path, 3)
    synced = record_fsyncs(monkeypatch)
    _recover(tmp_path, index())
    path = segment_path(tmp_path, SEG0)
    assert synced.count(str(path.with_name(path.name + RECOVERING_SUFFIX))) == 1


def _no_chunk_crcs(path: Path) -> None:
    """Make the file's first record (its header) claim more bytes than the file has: a scan stops there, so no
    chunk CRC vouches for any message and recovery must decode each one (reads by position still work)."""
    data = bytearray(path.read_bytes())
    data[9:17] = (1 << 40).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    assert crc_verdicts(path) == {}


def test_without_chunk_crcs_every_message_is_decoded_and_intact_episodes_are_kept(
    tmp_path: Path, index: Callable[[], Index]
) -> None:
    _written(tmp_path, 3)
    assert set(crc_verdicts(segment_path(tmp_path, SEG0)).values()) == {True}
    _no_chunk_crcs(segment_path(tmp_path, SEG0))
    idx = index()
    report = _recover(tmp_path, idx)
    assert report == RecoveryReport(rewritten=[SEG0], kept={SEG0: 3})
    assert _episode_ids_readable(tmp_path, idx) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


_MISMATCHES = {
    "a transition row points at the next step": (
        "UPDATE transitions SET (offset, length) = (SELECT offset, length FROM transitions WHERE idx = 5) "
        "WHERE idx = 4",
        1,
        "holds ('arm', 1, 2, False), not transition 4",
    ),
    "a START position holds the END": (
        "UPDATE episodes SET (start_offset, start_length) = (end_offset, end_length) WHERE episode = 2",
        2,
        "not the START of episode 2",
    ),
    "an END position holds the START": (
        "UPDATE episodes SET (end_offset, end_length) = (start_offset, start_length) WHERE episode = 0",
        0,
        "not the END of episode 0",
    ),
    "the events are of another episode": (
        "UPDATE episodes SET episode_id = 7 WHERE episode = 1",
        1,
        "not the START of episode 1",
    ),
    "the transition is no demonstration": ("UPDATE transitions SET is_demo = 1 WHERE idx = 7", 2, "not transition 7"),
}


@pytest.mark.parametrize("case", _MISMATCHES.values(), ids=_MISMATCHES.keys())
def test_without_chunk_crcs_a_message_that_is_not_what_its_row_says_loses_its_episode(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture, case: tuple[str, int, str]
) -> None:
    change, lost, reason = case
    _written(tmp_path, 3)
    _no_chunk_crcs(segment_path(tmp_path, SEG0))
    idx = index()
    with idx.transaction() as db:
        db.execute(change)
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [lost]} and report.kept == {SEG0: 2}
    assert f"lost 1 unreadable: episode {lost}: " in caplog.text and reason in caplog.text
    assert _episode_ids_readable(tmp_path, idx) == [e for e in range(3) if e != lost for _ in range(3)]


@pytest.mark.parametrize("at", ["transition", "event"])
def test_without_chunk_crcs_a_payload_that_does_not_decode_loses_its_episode(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture, at: str
) -> None:
    _written(tmp_path, 3)
    path = segment_path(tmp_path, SEG0)
    _no_chunk_crcs(path)
    idx = index()
    offset = idx.transitions(start=4, stop=5)[0].offset if at == "transition" else idx.episodes()[1].end_event.offset
    _set_byte(path, offset + MESSAGE_PREFIX, lambda _b: 0x7F)  # the CDR encapsulation header
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [1]} and "cannot decode" in caplog.text


def test_many_lost_episodes_are_listed_five_at_a_time(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 8)
    idx = index()
    with open(segment_path(tmp_path, SEG0), "r+b") as f:
        f.truncate(idx.episodes()[1].start_event.offset)  # every episode after the first is gone
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [1, 2, 3, 4, 5, 6, 7]}
    [line] = [r.getMessage() for r in caplog.records if "lost 7 unreadable" in r.getMessage()]
    assert [f"episode {e}: " in line for e in range(1, 8)] == [True] * 5 + [False] * 2
    assert "; and 2 more; original bytes kept in quarantine/" in line


def test_a_missing_segments_folder_is_an_error_not_an_empty_buffer(tmp_path: Path, index: Callable[[], Index]) -> None:
    _written(tmp_path, 2)
    idx = index()
    _recover(tmp_path, idx)  # closed now
    shutil.rmtree(tmp_path / "segments")
    with pytest.raises(BufferIndexError, match=r"segments is missing, yet the index lists 1 segments: restore it"):
        _recover(tmp_path, idx)
    assert idx.count() == (6, 2)  # nothing was dropped


def test_an_open_segment_row_without_a_folder_yet_is_just_removed(tmp_path: Path, index: Callable[[], Index]) -> None:
    """A writer that died between adding its first segment's row and making its folder."""
    idx = index()
    idx.add_segment(SEG0, 1)
    assert _recover(tmp_path, idx) == RecoveryReport(removed=[SEG0]) and idx.segments() == []


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda p: p.unlink(), "its file {path} is missing"),
        (lambda p: p.write_bytes(p.read_bytes() + b"x"), "{name} holds {size_plus_1} bytes, {size} when it was closed"),
        (lambda p: p.write_bytes(p.read_bytes()[:-1] + b"x"), "{name} does not end with a footer"),
        (lambda p: None, "None"),
    ],
)
def test_a_closed_segment_is_judged_by_its_size_and_footer(
    tmp_path: Path, index: Callable[[], Index], damage: Callable[[Path], object], problem: str
) -> None:
    _written(tmp_path, 1)
    idx = index()
    _recover(tmp_path, idx)
    [seg] = idx.segments()
    path = segment_path(tmp_path, SEG0)
    size = path.stat().st_size
    damage(path)
    expected = problem.format(path=path, name=path.name, size=size, size_plus_1=size + 1)
    assert str(closed_segment_problem(seg, path)) == expected


def test_frames_whose_channel_record_was_lost_are_rewritten_on_their_cameras_topics(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    """The camera channels are announced in the first episode's chunk. With the wrist channel's record damaged
    there, that episode is lost (its chunk's CRC) but the next one is kept whole: its frames on the unknown
    channel are told apart by decoding them, and the rewrite puts them on the wrist camera's topic again."""
    _written(tmp_path, 2)
    path = segment_path(tmp_path, SEG0)
    data = bytearray(path.read_bytes())
    data[data.find(WRIST.encode()) - 17] = 0x7F  # the channel record's opcode: a record no reader knows
    path.write_bytes(bytes(data))
    idx = index()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report.lost == {SEG0: [0]} and report.kept == {SEG0: 1}
    assert "episode 0: " in caplog.text and "its chunk's bytes do not match its CRC" in caplog.text
    assert {t.name: t.message_count for t in read_metadata(path.parent).topics} == {
        EVENT_TOPIC: 2,
        TRANSITION_TOPIC: 3,
        WRIST: 4,  # the kept episode's three steps and its last next frame
        FRONT: 4,
    }
    storage = DiskStorage(tmp_path, idx, CODEC, CONFIG)
    try:
        steps = episode("arm", 1, 3)
        assert [_wire(storage.read(i)) for i in range(3)] == [_wire(t) for t in steps]
    finally:
        storage.close()
