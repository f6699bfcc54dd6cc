"""The buffer's files on disk as outside data: an index file of random bytes, or a real one partly overwritten,
opens as a buffer or fails with one typed line (`BufferError`), never another exception; a real segment left by a
writer that died, then truncated or overwritten, is recovered on open keeping every episode whose bytes were not
touched, and `verify` passes afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test.buffer.factories import episode
from test.fuzz.strategies import CI, mutated
from user.buffer import BufferConfig, ReplayBuffer, StorageConfig
from user.buffer.disk.directory import segment_path
from user.buffer.disk.mcapscan import MESSAGE_PREFIX
from user.buffer.errors import BufferError
from user.buffer.index import INDEX_FILE, Index
from user.buffer.repair.quarantine import QUARANTINE_DIR

CONFIG = BufferConfig(storage=StorageConfig(segment_max_episodes=3, fsync="never", cache_size=16), prefetch=0)
OPEN_SEGMENT = "seg_000001"  # the one the writer was filling when it died
FEWER = settings(CI, max_examples=60)  # each example opens a buffer: keeps the file to seconds


@dataclass(frozen=True)
class Template:
    directory: Path
    index: bytes  # the index file as a closed buffer leaves it
    segment: bytes  # the open segment's bytes
    ranges: dict[int, tuple[int, int]]  # robot episode id -> bytes of the open segment that hold it (start, end)


def _write_and_die(directory: Path) -> None:
    """A closed segment of three episodes, then an open one of five, left as kill -9 leaves it."""
    buf = ReplayBuffer.open(directory, CONFIG)
    for e in range(3):
        buf.add_episode(episode("arm", e, 2 + e % 2, images=e % 2 == 0))
    buf.writer.config = StorageConfig(segment_max_episodes=100, fsync="never")  # type: ignore[union-attr]
    for e in range(3, 8):
        buf.add_episode(episode("arm", e, 2 + e % 2, images=e % 2 == 0))
    assert buf.writer is not None and buf.writer._segment is not None
    buf.writer._segment.abandon()
    buf.storage.close()
    buf.storage.index.close()
    assert buf._lock_fd is not None
    os.close(buf._lock_fd)


@pytest.fixture(scope="module")
def template() -> Iterator[Template]:
    directory = Path(tempfile.mkdtemp(prefix="fuzz-buffer-"))
    _write_and_die(directory / "died")
    with ReplayBuffer.open(directory / "closed", CONFIG) as buf:
        for e in range(6):
            buf.add_episode(episode("arm", e, 3, images=False))
    index = Index(directory / "died", read_only=True)
    episodes = index.episodes(index.segments()[1].id)
    index.close()
    ranges, start = {}, 0
    for ep in episodes:
        end = ep.end_event.offset + MESSAGE_PREFIX + ep.end_event.length
        ranges[ep.episode_id] = (start, end)
        start = end
    yield Template(
        directory,
        (directory / "closed" / INDEX_FILE).read_bytes(),
        segment_path(directory / "died", OPEN_SEGMENT).read_bytes(),
        ranges,
    )
    shutil.rmtree(directory)


def _copy(source: Path, scratch: str) -> Path:
    target = Path(scratch) / "buffer"
    shutil.copytree(source, target)
    return target


def _opens_or_one_typed_line(directory: Path, *, read_only: bool) -> None:
    try:
        with ReplayBuffer.open(directory, CONFIG, read_only=read_only) as buf:
            report = buf.verify()
            assert report.transitions == len(buf) or not report.ok
    except BufferError as exc:
        assert str(exc) and "\n" not in str(exc), exc


@FEWER
@given(data=st.one_of(st.binary(max_size=4096), st.just(b"")), read_only=st.booleans())
def test_an_index_of_random_bytes_is_a_typed_error(template: Template, data: bytes, read_only: bool) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = _copy(template.directory / "closed", scratch)
        (directory / INDEX_FILE).write_bytes(data)
        _opens_or_one_typed_line(directory, read_only=read_only)


@st.composite
def _overwritten(draw: st.DrawFn, valid: bytes) -> bytes:
    """`valid` with a run of bytes overwritten (a torn page, a stray write), or any mutation of it."""
    if draw(st.booleans()):
        return draw(mutated(valid))
    data = bytearray(valid)
    at = draw(st.integers(0, len(data) - 1))
    run = draw(st.binary(min_size=1, max_size=4096))
    data[at : at + len(run)] = run[: len(data) - at]
    return bytes(data)


@FEWER
@given(data=st.data(), read_only=st.booleans())
def test_a_partly_overwritten_index_opens_or_is_a_typed_error(
    template: Template, data: st.DataObject, read_only: bool
) -> None:
    damaged = data.draw(_overwritten(template.index))
    with tempfile.TemporaryDirectory() as scratch:
        directory = _copy(template.directory / "closed", scratch)
        (directory / INDEX_FILE).write_bytes(damaged)
        _opens_or_one_typed_line(directory, read_only=read_only)


def _untouched(template: Template, damaged: bytes) -> set[int]:
    """The episodes of the open segment none of whose bytes differ (or are missing) in `damaged`."""
    original = template.segment
    if len(damaged) == len(original):
        changed = [i for i, (a, b) in enumerate(zip(original, damaged, strict=True)) if a != b]
        return {e for e, (lo, hi) in template.ranges.items() if not any(lo <= i < hi for i in changed)}
    same = next((i for i, (a, b) in enumerate(zip(original, damaged, strict=False)) if a != b), None)
    cut = min(len(original), len(damaged)) if same is None else same
    return {e for e, (_, hi) in template.ranges.items() if hi <= cut}


@FEWER
@given(data=st.data())
def test_a_damaged_open_segment_keeps_every_untouched_episode(template: Template, data: st.DataObject) -> None:
    damaged = data.draw(st.one_of(mutated(template.segment), _overwritten(template.segment)))
    untouched = _untouched(template, damaged)
    with tempfile.TemporaryDirectory() as scratch:
        directory = _copy(template.directory / "died", scratch)
        segment_path(directory, OPEN_SEGMENT).write_bytes(damaged)
        with ReplayBuffer.open(directory, CONFIG) as buf:
            kept = {e.episode_id for e in buf.storage.index.episodes()}
            assert {0, 1, 2} | untouched <= kept, (untouched, kept)
            assert buf.verify().ok, buf.verify().problems
            lost = buf.recovery.lost if buf.recovery is not None else {}
        if lost:  # the original bytes are kept aside
            [folder] = (directory / QUARANTINE_DIR).iterdir()
            assert (folder / f"{OPEN_SEGMENT}_0.mcap").read_bytes() == damaged


@FEWER
@given(cut=st.integers(0, 200_000), extra=st.binary(max_size=64))
def test_a_truncated_or_extended_closed_segment_keeps_every_untouched_episode(
    template: Template, cut: int, extra: bytes
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = _copy(template.directory / "closed", scratch)
        path = segment_path(directory, "seg_000000")
        original = path.read_bytes()
        index = Index(directory, read_only=True)
        ends = {
            e.episode_id: e.end_event.offset + MESSAGE_PREFIX + e.end_event.length
            for e in index.episodes(index.segments()[0].id)
        }
        index.close()
        damaged = original[: min(cut, len(original))] + extra
        path.write_bytes(damaged)
        with ReplayBuffer.open(directory, CONFIG) as buf:
            kept = {e.episode_id for e in buf.storage.index.episodes()}
            assert {e for e, end in ends.items() if end <= min(cut, len(original))} | {3, 4, 5} <= kept
            assert buf.verify().ok, buf.verify().problems
