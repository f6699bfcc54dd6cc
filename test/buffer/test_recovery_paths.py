"""Every path of `recover()` on its own, against segments left by a writer that died: what it keeps, what it
drops, and that its report (and its log) says both."""

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from mcap.reader import make_reader

from test.buffer.factories import episode
from test.buffer.fsyncs import record_fsyncs
from user.buffer.config import StorageConfig
from user.buffer.index import Index
from user.buffer.metadata import METADATA_FILE, read_metadata
from user.buffer.recovery import RECOVERING_SUFFIX, RecoveryReport, recover, stats_from_index
from user.buffer.segments import EVENT_TOPIC, TRANSITION_TOPIC, TRANSITION_TYPE, SegmentReader
from user.buffer.storage import DiskStorage, segment_path
from user.buffer.writer import EpisodeWriter
from user.interfaces import default_codec
from user.interfaces.domain import transition_from_msg

CODEC = default_codec()
CONFIG = StorageConfig(cache_size=100, fsync="never", segment_max_episodes=10)
SEG0 = "seg_000000"


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
    assert report == RecoveryReport(rewritten=[SEG0])
    assert report.changed and f"rewrote ['{SEG0}']" in caplog.text
    [seg] = idx.segments()
    path = segment_path(tmp_path, SEG0)
    assert seg.state == "closed" and seg.bytes == os.path.getsize(path) and seg.closed_ns is not None
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()  # a footer and summary: the file is a finished MCAP
    assert summary is not None and summary.statistics is not None and summary.statistics.message_count == 3 * 5
    meta = read_metadata(path.parent)
    assert meta.message_count == 15 and {t.name: t.message_count for t in meta.topics} == {
        EVENT_TOPIC: 6,
        TRANSITION_TOPIC: 9,
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


def test_an_unreadable_first_episode_drops_every_episode_and_removes_the_segment(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 3)
    idx = index()
    first = idx.episodes()[0]
    with open(segment_path(tmp_path, SEG0), "r+b") as f:
        f.seek(first.start_event.offset)
        f.write(b"\xff")  # the record's opcode: no longer a message
    with caplog.at_level(logging.WARNING, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(removed=[SEG0], dropped_episodes=3)
    assert "episode 0 unreadable" in caplog.text and "dropping it and 2 later" in caplog.text
    assert "dropped 3 unreadable episodes" in caplog.text
    assert idx.segments() == [] and idx.count() == (0, 0)
    assert not segment_path(tmp_path, SEG0).parent.exists()


def test_an_unreadable_middle_episode_keeps_the_ones_before_it(
    tmp_path: Path, index: Callable[[], Index], caplog: pytest.LogCaptureFixture
) -> None:
    _written(tmp_path, 4)
    idx = index()
    second = idx.transitions(start=3, stop=4)[0]
    with open(segment_path(tmp_path, SEG0), "r+b") as f:
        f.truncate(second.offset + 5)  # the rest of the file never reached the disk
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"):
        report = _recover(tmp_path, idx)
    assert report == RecoveryReport(rewritten=[SEG0], dropped_episodes=3)
    assert "episode 1 unreadable" in caplog.text and "dropping it and 2 later" in caplog.text
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
    assert report.dropped_episodes == 1 and report.rewritten == [SEG0]
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
    assert report == RecoveryReport(removed=[SEG0], dropped_episodes=2)
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
    assert rebuilt.message_count == written.message_count == 10
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
    assert report == RecoveryReport(rewritten=["seg_000001"], metadata_rebuilt=[SEG0])
    summary = (
        f"recovered {tmp_path}: rewrote ['seg_000001'], removed none, rolled forward none, "
        "dropped 0 unreadable episodes"
    )
    assert summary in caplog.text.splitlines()[-1]
    meta = read_metadata(segment_path(tmp_path, SEG0).parent)
    assert meta.message_count == 2 * 5  # its own two episodes, not the open segment's
    assert {t.name: t.message_count for t in meta.topics} == {EVENT_TOPIC: 4, TRANSITION_TOPIC: 6}
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
    assert report == RecoveryReport(removed=[SEG0, "seg_000001"], dropped_episodes=2)
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
    assert report == RecoveryReport(removed=[SEG0, "seg_000001"], dropped_episodes=2)
    assert "segment seg_000001: episode 1 unreadable (" in caplog.text and "dropping it and 0 later" in caplog.text


def test_an_episode_without_any_transition_rows_is_dropped_not_fatal(
    tmp_path: Path, index: Callable[[], Index]
) -> None:
    _written(tmp_path, 2)
    idx = index()
    with idx.transaction() as db:
        db.execute("DELETE FROM transitions WHERE episode = 1")
    report = _recover(tmp_path, idx)
    assert report.dropped_episodes == 1 and _episode_ids_readable(tmp_path, idx) == [0, 0, 0]


def test_the_rewritten_file_is_made_durable_once_when_it_is_finished(
    tmp_path: Path, index: Callable[[], Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(tmp_path, 3)
    synced = record_fsyncs(monkeypatch)
    _recover(tmp_path, index())
    path = segment_path(tmp_path, SEG0)
    assert synced.count(str(path.with_name(path.name + RECOVERING_SUFFIX))) == 1
