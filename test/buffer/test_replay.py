"""The buffer end to end: whole episodes in, segments rolled, batches out, reopened, read beside a writer."""

import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from test.buffer.factories import episode, transition
from user.buffer import (
    BufferConfig,
    BufferLockedError,
    CorruptRowError,
    RateLimiterConfig,
    ReadOnlyBufferError,
    ReplayBuffer,
    SamplerConfig,
    SampleTimeoutError,
    StorageConfig,
    TransitionQuery,
)
from user.buffer.disk.metadata import read_metadata
from user.buffer.errors import BufferError


def _config(**storage: object) -> BufferConfig:
    return BufferConfig(
        storage=StorageConfig(**{"segment_max_episodes": 3, "cache_size": 1000, **storage}),  # type: ignore[arg-type]
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=8,
        prefetch=0,
    )


def _fill(buf: ReplayBuffer, episodes: int, robots: tuple[str, ...] = ("a", "b"), steps: int = 4) -> None:
    """Robots' episodes interleaved step by step, as they arrive from several robots at once."""
    for e in range(episodes):
        streams = [episode(r, e, steps + k, demo=e == 0, success=e % 2 == 1) for k, r in enumerate(robots)]
        for s in range(max(len(x) for x in streams)):
            for stream in streams:
                if s < len(stream):
                    buf.add(stream[s])


def test_episodes_in_segments_out_and_back(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _fill(buf, 4)
        assert len(buf) == 4 * (4 + 5)
        info = buf.info()
        assert (info.episodes, info.segments_closed, info.segments_open) == (8, 2, 1)
        assert info.demo_transitions == 9 and info.success_rate == 0.5
        batch = buf.sample()
        assert batch.state.shape == (8, 7) and batch.images["wrist"].shape == (8, 16, 16, 3)
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        assert len(ro) == 36 and ro.verify().ok
    bags = sorted((tmp_path / "segments").iterdir())
    assert [b.name for b in bags] == ["seg_000000", "seg_000001", "seg_000002"]
    for bag in bags:
        meta = read_metadata(bag)
        assert meta.version == 5 and meta.storage_identifier == "mcap"
        with open(bag / meta.relative_file_paths[0], "rb") as f:
            reader = make_reader(f)
            assert reader.get_header().profile == "ros2"
            assert sum(1 for _ in reader.iter_messages()) == meta.message_count


def test_segments_roll_by_size(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(segment_max_episodes=1000, segment_max_mb=0.01)) as buf:
        _fill(buf, 2, robots=("a",))
    assert len(list((tmp_path / "segments").iterdir())) == 2


def test_cache_miss_reads_the_same_transition_from_disk(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(cache_size=5)) as buf:
        _fill(buf, 2, robots=("a",))
        storage = buf.storage
        assert len(storage.cache) == 5 and storage.cache.get(len(buf) - 5) is not None
        assert storage.cache.get(len(buf) - 6) is None  # the newest five: FIFO
        reads = storage.disk_reads
        (old,) = buf.get([1])
        assert storage.disk_reads == reads + 2  # its next frames are in step 2's record, not cached either
        expected = transition("a", 0, 1, 4, demo=True)
        assert old.observation.images == expected.observation.images
        assert old.next_observation.images == expected.next_observation.images
        assert np.array_equal(old.action.data, expected.action.data) and old.is_demo
        buf.get([len(buf) - 1])
        assert storage.disk_reads == reads + 2  # newest data is served from memory
        last = storage.read(3)  # the episode's last step holds its next frames itself: one record read
        assert storage.disk_reads == reads + 3
        assert last.next_observation.images == transition("a", 0, 3, 4, demo=True).next_observation.images


def test_cache_size_as_ratio(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(cache_ratio=0.5)) as buf:
        _fill(buf, 2, robots=("a",))
        assert buf.storage.cache.capacity == 4 and len(buf.storage.cache) == 4


def test_only_whole_episodes_are_stored(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        ep = episode("a", 0, 4)
        for t in [ep[0], ep[1], ep[3]]:  # step 2 lost
            assert buf.add(t) is None
        for t in episode("a", 1, 3)[:2]:
            buf.add(t)
        for t in episode("a", 2, 3):  # starts before episode 1 ended: episode 1 is dropped
            buf.add(t)
        buf.add(episode("b", 0, 3)[1])  # first step seen is not 0
        buf.add(episode("b", 0, 3)[2])
        assert len(buf) == 3 and buf.info().episodes == 1
        buf.add(episode("c", 0, 5)[0])
        buf.add(episode("c", 0, 5)[1])
        assert buf.end_episode("c", 0, 2) == 1
        assert buf.get([4])[0].truncated  # ended by the operator: its last step is truncated
        buf.add(episode("e", 0, 5)[0])  # still pending when closed: dropped, never half
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        assert len(ro) == 5 and ro.verify().ok


def test_read_only_beside_a_running_writer(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as writer:
        _fill(writer, 1, robots=("a",))
        with pytest.raises(BufferLockedError, match="another process is writing"):
            ReplayBuffer.open(tmp_path, _config())
        reader = ReplayBuffer.open(tmp_path, _config(), read_only=True)
        assert len(reader) == 4
        _fill(writer, 2, robots=("b",))
        assert reader.refresh() == 8 and len(reader) == 12
        assert len(reader.sample()) == 8
        assert reader.verify().ok  # the open segment has no footer yet; verify reads it anyway
        with pytest.raises(ReadOnlyBufferError):
            reader.add(transition("a", 9, 0, 1))
        reader.close()


def test_rate_limited_sampling_and_state(tmp_path: Path) -> None:
    config = BufferConfig(
        storage=StorageConfig(segment_max_episodes=10),
        sampler=SamplerConfig(kind="uniform", seed=1),
        rate_limiter=RateLimiterConfig(samples_per_insert=2.0, min_size=4, error_buffer=8.0),
        batch_size=8,
        prefetch=1,
    )
    with ReplayBuffer.open(tmp_path, config) as buf:
        with pytest.raises(SampleTimeoutError):
            buf.sample(timeout_s=0.2)  # below min_size
        _fill(buf, 1, robots=("a",))
        assert len(buf.sample(timeout_s=5.0)) == 8  # the slack allows one batch
        with pytest.raises(SampleTimeoutError):
            buf.sample(batch_size=8 + 1, timeout_s=0.2)  # the ratio holds it back
        _fill(buf, 2, robots=("b",))  # 8 inserts buy 16 samples
        assert len(buf.sample(timeout_s=5.0)) == 8
        state = buf.state_dict()
        assert state["rate_limiter"]["inserts"] == 12 and state["sampler"]["kind"] == "uniform"
    with ReplayBuffer.open(tmp_path, config) as again:
        again.resume(state)
        assert again.rate_limiter.samples == state["rate_limiter"]["samples"]


def test_metadata_queries(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _fill(buf, 3, robots=("a", "b"))
        demos = buf.query(TransitionQuery(is_demo=True))
        assert len(demos) == 9 and all(t.is_demo for t in buf.get(demos))
        assert len(buf.query(TransitionQuery(robot_id="b", success=True))) == 1


def test_an_index_with_a_hole_is_refused(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _fill(buf, 1, robots=("a",))
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    db.execute("DELETE FROM transitions WHERE idx = 2")
    db.commit()
    db.close()
    with pytest.raises(CorruptRowError, match="transition 3: transition numbers in the index are not contiguous"):
        ReplayBuffer.open(tmp_path, _config(), read_only=True)


def test_read_only_sampling_waits_for_the_writer_with_a_deadline(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as writer:
        reader = ReplayBuffer.open(tmp_path, _config(), read_only=True)
        started = time.monotonic()
        with pytest.raises(SampleTimeoutError, match="0 of the 1 transitions needed"):
            reader.sample(timeout_s=0.3)
        assert 0.3 <= time.monotonic() - started < 2.0
        _fill(writer, 1, robots=("a",))
        assert len(reader.sample(timeout_s=5.0)) == 8  # found the new episode while waiting
        reader.close()


def test_a_resent_episode_is_stored_whole_beside_a_live_one(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path / "b") as buf:
        live = episode("r", 5, steps=4, images=False)
        for t in live[:2]:
            assert buf.add(t) is None  # episode 5 is being received live ...
        resent = episode("r", 4, steps=3, images=False)
        assert not buf.has_episode("r", 4)
        buf.add_episode(resent)  # ... when the robot re-sends episode 4, which the learner missed
        assert buf.add(live[2]) is None and buf.add(live[3]) is not None  # the live one is not disturbed
        assert buf.has_episode("r", 4) and buf.has_episode("r", 5) and len(buf) == 7
        stored = buf.get(list(range(len(buf))))
        assert [(t.episode_id, t.step) for t in stored] == [(4, 0), (4, 1), (4, 2), (5, 0), (5, 1), (5, 2), (5, 3)]
        with pytest.raises(BufferError, match=r"step 2 is out of order \(step 1 was due\)"):
            buf.add_episode([resent[0], resent[2]])
        with pytest.raises(BufferError, match="does not end the episode"):
            buf.add_episode(episode("r", 9, steps=3, images=False)[:2])


def test_bytes_received_with_transitions_are_stored_as_they_came(tmp_path: Path) -> None:
    """`add` and `add_episode` hand received CDR bytes to the writer, which stores them instead of encoding."""
    from user.buffer.disk.segments import Position
    from user.interfaces import default_codec
    from user.interfaces.domain import transition_to_msg

    codec = default_codec()

    def received(t: object) -> bytes:  # decodes to `t`, but is not what the buffer would encode
        return codec.encode(transition_to_msg(t, codec)) + b"\x00"  # type: ignore[arg-type]

    with ReplayBuffer.open(tmp_path / "b", _config()) as buf:
        live, resent = episode("r", 1, steps=2, images=False), episode("r", 0, steps=2, images=False)
        for t in live:
            buf.add(t, payload=received(t))
        buf.add_episode(resent, payloads=[received(t) for t in resent])
        rows = buf.storage.index.transitions()
        stored = [buf.storage.read_payload(r.segment_id, Position(r.offset, r.length)) for r in rows]
        assert stored == [received(t) for t in [*live, *resent]]
        assert [buf.storage.read(i).step for i in range(4)] == [0, 1, 0, 1]
