"""A buffer written before a message changed (test/data/buffer_v1: written before chunk provenance was added to
user/msg/Action) opens, samples, verifies, recovers and grows: each segment is read with the definitions it
carries, and its transitions read back as written, chunk provenance at its default."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, StorageConfig
from user.buffer.disk.segment_schemas import leading_definitions, segment_codec
from user.buffer.errors import SegmentError
from user.buffer.repair.reindex import reindex
from user.interfaces.codec import default_codec
from user.interfaces.domain import Transition

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "buffer_v1"
# what test/data/buffer_v1 holds: robot fr3's episodes 0..2 of 3 steps (test.buffer.factories), episode e written
# with policy version e, episode 1 intervened, episode 2 a success; segments of 2 episodes
WRITTEN = [t for e in range(3) for t in episode("fr3", e, 3, version=e, intervened=e == 1, success=e == 2)]


def _config() -> BufferConfig:
    return BufferConfig(
        storage=StorageConfig(segment_max_episodes=2, cache_size=0),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=4,
        prefetch=0,
    )


@pytest.fixture
def older(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "buffer")
    return tmp_path / "buffer"


def _same(got: list[Transition], want: list[Transition]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g.robot_id, g.episode_id, g.step) == (w.robot_id, w.episode_id, w.step)
        assert g.action.policy_version == w.action.policy_version and g.action.intervened == w.action.intervened
        assert (g.action.chunk_seq, g.action.chunk_index) == (0, 0)
        np.testing.assert_array_equal(g.action.data, w.action.data)
        np.testing.assert_array_equal(g.observation.state, w.observation.state)
        assert g.observation.images == w.observation.images and g.success == w.success


def test_the_fixture_was_written_with_the_older_definitions() -> None:
    for path in sorted(FIXTURE.glob("segments/*/*.mcap")):
        text = leading_definitions(path)["user/msg/Transition"][1]
        assert "policy_version" in text and "chunk_seq" not in text
        assert segment_codec(path, default_codec()) is not default_codec()


def test_an_older_buffer_reads_back_as_written_and_grows(older: Path) -> None:
    with ReplayBuffer.open(older, _config()) as buf:
        assert len(buf) == 9
        _same(buf.get(list(range(9))), WRITTEN)
        assert buf.sample().state.shape == (4, 7)
        assert buf.verify().ok
        new = episode("fr3", 3, 3)
        for t in new:
            buf.add(t)
        assert len(buf) == 12
    with ReplayBuffer.open(older, _config(), read_only=True) as ro:
        got = ro.get(list(range(12)))
        _same(got[:9], WRITTEN)
        assert [t.episode_id for t in got[9:]] == [3, 3, 3]
    newest = sorted(older.glob("segments/*/*.mcap"))[-1]
    assert "chunk_seq" in leading_definitions(newest)["user/msg/Transition"][1]


def test_an_older_segment_cut_by_a_crash_is_recovered_with_its_own_definitions(older: Path) -> None:
    """An older version killed while writing its last segment: recovery copies what is whole into a new file,
    which keeps the definitions those bytes were written with (it reads back now and after another reopen)."""
    path = next(older.glob("segments/seg_000001/*.mcap"))
    path.write_bytes(path.read_bytes()[:-200])  # footer and summary gone
    with sqlite3.connect(older / "index.sqlite3") as db:
        db.execute("UPDATE segments SET state = 'open', closed_ns = NULL WHERE name = 'seg_000001'")
    for _ in range(2):
        with ReplayBuffer.open(older, _config()) as buf:
            assert len(buf) == 9
            _same(buf.get(list(range(9))), WRITTEN)
            assert buf.verify().ok
    assert "chunk_seq" not in leading_definitions(path)["user/msg/Transition"][1]


def test_an_older_buffer_reindexes(older: Path) -> None:
    (older / "index.sqlite3").unlink()
    report = reindex(older)
    assert report.transitions == 9
    with ReplayBuffer.open(older, _config(), read_only=True) as ro:
        _same(ro.get(list(range(9))), WRITTEN)


def test_a_segment_whose_start_is_not_mcap_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "seg.mcap"
    bad.write_bytes(b"not an mcap file at all")
    with pytest.raises(SegmentError, match="bad magic"):
        segment_codec(bad, default_codec())
    assert segment_codec(bad, default_codec(), salvage=True) is default_codec()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(next(FIXTURE.glob("segments/seg_000000/*.mcap")).read_bytes()[:8])  # the magic alone
    assert leading_definitions(cut) == {}
    assert segment_codec(cut, default_codec()) is default_codec()


def test_definitions_from_damaged_bytes_are_not_trusted(tmp_path: Path) -> None:
    """A flipped byte in a definition can still parse (`step` read as `stap`) and would decode every record of the
    segment wrongly; the chunk holding it no longer matches its CRC, so it is refused (salvage: today's)."""
    path = tmp_path / "seg.mcap"
    data = next(FIXTURE.glob("segments/seg_000000/*.mcap")).read_bytes()
    at = data.index(b"uint32 step")
    path.write_bytes(data[:at] + b"uint32 stap" + data[at + len(b"uint32 step") :])
    with pytest.raises(SegmentError, match="does not match its CRC"):
        leading_definitions(path)
    assert segment_codec(path, default_codec(), salvage=True) is default_codec()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: at + 100])  # the first chunk cut short: its definitions cannot be checked
    with pytest.raises(SegmentError, match="cut short"):
        leading_definitions(cut)


def test_a_first_chunk_whose_length_runs_past_the_file_is_one_error(tmp_path: Path) -> None:
    """A damaged length field (found by the fuzz test: 2^63 bytes) is a segment cut short, never a read of it."""
    data = bytearray(next(FIXTURE.glob("segments/seg_000000/*.mcap")).read_bytes())
    header_length = int.from_bytes(data[9:17], "little")
    chunk = 8 + 9 + header_length  # the magic, the header record, then the first chunk's opcode and length
    assert data[chunk] == 0x06
    data[chunk + 1 : chunk + 9] = (2**63 - 1).to_bytes(8, "little")
    path = tmp_path / "seg.mcap"
    path.write_bytes(bytes(data))
    with pytest.raises(SegmentError, match="cut short"):
        leading_definitions(path)
    assert segment_codec(path, default_codec(), salvage=True) is default_codec()
