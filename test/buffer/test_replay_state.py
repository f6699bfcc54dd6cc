"""The buffer facade beyond the happy path: a resumed learner samples and is rate-limited as before, sampling
waits (and stops waiting) as it must, every stored transition counts as inserted, and opening is careful."""

import logging
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import episode, transition
from user.buffer import (
    BufferConfig,
    BufferIndexError,
    RateLimiter,
    RateLimiterConfig,
    ReadOnlyBufferError,
    ReplayBuffer,
    SamplerConfig,
    SampleTimeoutError,
    StorageConfig,
    TransitionQuery,
)
from user.buffer.disk.directory import LOCK_FILE, segment_path
from user.buffer.disk.mcapscan import MESSAGE_PREFIX

RELEASED_WITHIN_S = 5.0


def _config(
    kind: str = "uniform", *, spi: float = 0.0, min_size: int = 1, error_buffer: float = 1024.0, prefetch: int = 0
) -> BufferConfig:
    return BufferConfig(
        storage=StorageConfig(segment_max_episodes=10, fsync="never"),  # durability is not tested here
        sampler=SamplerConfig(kind=kind, demo_ratio=0.25, seed=3),  # type: ignore[arg-type]
        rate_limiter=RateLimiterConfig(samples_per_insert=spi, min_size=min_size, error_buffer=error_buffer),
        batch_size=8,
        prefetch=prefetch,
    )


def _store(buf: ReplayBuffer, first: int, count: int, *, steps: int = 5, demo: bool = False) -> None:
    for e in range(first, first + count):
        buf.add_episode(episode("a", e, steps, demo=demo, images=False))


class _RecordingLimiter(RateLimiter):
    """A rate limiter that records how long each caller was prepared to wait."""

    def __init__(self, *args: float) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.acquire_timeouts: list[float] = []
        self.insert_waits: list[float] = []

    def acquire(self, k: int, timeout_s: float) -> bool:
        self.acquire_timeouts.append(timeout_s)
        return super().acquire(k, timeout_s)

    def wait_for_insert(self, timeout_s: float) -> bool:
        self.insert_waits.append(timeout_s)
        return super().wait_for_insert(timeout_s)


def _recording(buf: ReplayBuffer) -> _RecordingLimiter:
    limiter = _RecordingLimiter.from_config(buf.config.rate_limiter)
    limiter.load_state_dict(buf.rate_limiter.state_dict())
    buf.rate_limiter = limiter
    return limiter  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------- resuming


def test_a_resumed_learner_samples_and_is_rate_limited_as_before(tmp_path: Path) -> None:
    """state_dict / resume carry the sampler (generator, parameters) and the limiter's counts."""
    config = _config("demo_ratio", spi=1.0, min_size=4, error_buffer=24.0)  # budget: 20 - 4 + 24 = 40 samples
    with ReplayBuffer.open(tmp_path, config) as buf:
        _store(buf, 0, 2, demo=True)
        _store(buf, 2, 2)
        for _ in range(2):
            buf.sample(timeout_s=1.0)
        state = buf.state_dict()
        expected = buf.sample(timeout_s=1.0).indices
    assert int((expected < 10).sum()) == 2  # a quarter of the batch from demonstrations
    with ReplayBuffer.open(tmp_path, config) as again:
        again.resume(state)
        assert np.array_equal(again.sample(timeout_s=1.0).indices, expected)
        for _ in range(2):  # 24 of the 40 samples taken: two batches left, as before the restart
            again.sample(timeout_s=1.0)
        with pytest.raises(SampleTimeoutError, match="rate limit: 40 sampled for 20 inserted"):
            again.sample(timeout_s=0.1)


def test_a_read_only_buffer_resumes_from_a_writers_state(tmp_path: Path) -> None:
    """An evaluation process beside the writer loads the learner's checkpoint and draws what it would."""
    with ReplayBuffer.open(tmp_path, _config()) as writer:
        _store(writer, 0, 3)
        state = writer.state_dict()
        assert sorted(state) == ["rate_limiter", "sampler"]  # what resume reads; the data's truth is on disk
        expected = writer.sample(timeout_s=1.0).indices
        with ReplayBuffer.open(tmp_path, _config(), read_only=True) as reader:
            reader.resume(state)
            assert np.array_equal(reader.sample(timeout_s=1.0).indices, expected)
            writer.add(transition("a", 9, 0, 2))
            assert writer.steps_in_progress() == {"a": 1} and reader.steps_in_progress() == {}
            with pytest.raises(ReadOnlyBufferError, match=f"{re.escape(str(tmp_path))} is open read-only"):
                reader.add(transition("a", 9, 0, 1))


# ------------------------------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("prefetch", [0, 2])
def test_sample_gives_the_requested_batch_size(tmp_path: Path, prefetch: int) -> None:
    with ReplayBuffer.open(tmp_path, _config(prefetch=prefetch)) as buf:
        _store(buf, 0, 2)
        assert len(buf.sample(timeout_s=RELEASED_WITHIN_S)) == 8  # the configured size
        assert len(buf.sample(batch_size=5, timeout_s=RELEASED_WITHIN_S)) == 5


def test_prefetch_draws_default_batches_in_the_background(tmp_path: Path) -> None:
    """prefetch > 0: batches of the configured size are prepared by the worker; other sizes (and prefetch 0)
    are drawn in the caller's thread."""

    def drawing_threads(buf: ReplayBuffer) -> list[str]:
        names: list[str] = []
        draw = buf.sampler.sample

        def sample(view: object, batch_size: int) -> np.ndarray:
            names.append(threading.current_thread().name)
            return draw(view, batch_size)  # type: ignore[arg-type]

        buf.sampler.sample = sample  # type: ignore[method-assign]
        return names

    with ReplayBuffer.open(tmp_path / "pre", _config(prefetch=1)) as buf:
        _store(buf, 0, 2)
        names = drawing_threads(buf)
        assert len(buf.sample(timeout_s=RELEASED_WITHIN_S)) == 8
        assert "buffer-prefetch" in names and threading.current_thread().name not in names
        assert len(buf.sample(batch_size=3, timeout_s=RELEASED_WITHIN_S)) == 3
        assert threading.current_thread().name in names
    with ReplayBuffer.open(tmp_path / "direct", _config(prefetch=0)) as buf:
        _store(buf, 0, 2)
        names = drawing_threads(buf)
        buf.sample(timeout_s=RELEASED_WITHIN_S)
        assert names == [threading.current_thread().name]


def test_sampling_waits_for_something_to_draw_then_draws_a_single_intervened_step(tmp_path: Path) -> None:
    """An intervention learner with data but no intervention yet waits on inserts (not a busy loop, never
    past its deadline) and says why it timed out; one intervened step is then enough."""
    with ReplayBuffer.open(tmp_path, _config("intervention")) as buf:
        _store(buf, 0, 2)
        limiter = _recording(buf)
        with pytest.raises(SampleTimeoutError, match="the intervention sampler has nothing to draw from"):
            buf.sample(timeout_s=0.2)
        assert limiter.insert_waits and max(limiter.insert_waits) <= 0.2
        assert not limiter.acquire_timeouts  # nothing was taken from the rate budget
        steps = episode("a", 5, 4, images=False)
        steps[2] = transition("a", 5, 2, 4, intervened=True, images=False)
        buf.add_episode(steps)
        batch = buf.sample(timeout_s=RELEASED_WITHIN_S)
        assert set(batch.indices.tolist()) == {12} and batch.intervened.all()


def test_a_rate_limited_sample_times_out_within_its_deadline_saying_why(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config(spi=1.0, min_size=10, error_buffer=1.0)) as buf:
        _store(buf, 0, 2)  # exactly min_size stored: only the ratio holds the batch back
        limiter = _recording(buf)
        with pytest.raises(SampleTimeoutError, match="rate limit: 0 sampled for 10 inserted"):
            buf.sample(timeout_s=0.2)
        assert limiter.acquire_timeouts and max(limiter.acquire_timeouts) <= 0.2
        _store(buf, 2, 2)  # 10 more inserts: room for a batch
        assert len(buf.sample()) == 8
        assert limiter.acquire_timeouts[-1] <= 30.0  # the default deadline


def test_close_wakes_a_sampler_blocked_in_another_thread(tmp_path: Path) -> None:
    buf = ReplayBuffer.open(tmp_path, _config(min_size=100))
    done = threading.Event()
    raised: list[BaseException] = []

    def learner() -> None:
        try:
            buf.sample(timeout_s=30.0)
        except BaseException as exc:
            raised.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=learner, daemon=True)
    thread.start()
    try:
        assert not done.wait(0.2), "sampling below min_size did not wait"
    finally:
        buf.close()
    assert done.wait(RELEASED_WITHIN_S), "close() did not wake the waiting learner"
    assert len(raised) == 1 and isinstance(raised[0], SampleTimeoutError)
    buf.close()  # closing again is harmless
    thread.join(RELEASED_WITHIN_S)


# ------------------------------------------------------------------------------------------------- writing


def test_every_stored_transition_counts_as_inserted(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        for t in episode("a", 0, 4, images=False):
            buf.add(t)
        assert buf.rate_limiter.inserts == len(buf) == 4
        for t in episode("b", 0, 5, images=False)[:3]:
            buf.add(t)
        assert buf.rate_limiter.inserts == 4  # unfinished: not stored yet
        assert buf.end_episode("b", 0, 3) is not None  # operator reset
        assert buf.rate_limiter.inserts == len(buf) == 7
        assert buf.end_episode("b", 0, 3) is None
        buf.add(episode("c", 0, 5, images=False)[0])
        assert buf.rate_limiter.inserts == 7 and buf.steps_in_progress() == {"c": 1}  # unfinished again
        buf.add_episode(episode("d", 0, 3, images=False))  # re-sent whole
        assert buf.rate_limiter.inserts == len(buf) == 10


def test_the_callers_arrival_time_is_stored(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        for k, t in enumerate(episode("a", 0, 3, images=False)):
            buf.add(t, wall_ns=1_000 + k)
        buf.add_episode(episode("a", 1, 2, images=False), wall_ns=5_000)
        assert buf.storage.view().wall_ns.tolist() == [1_000, 1_001, 1_002, 5_000, 5_000]


def test_query_honours_its_limit(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _store(buf, 0, 2, demo=True)
        demos = buf.query(TransitionQuery(is_demo=True))
        assert len(demos) == 10 and buf.query(TransitionQuery(is_demo=True), limit=3) == demos[:3]


# ------------------------------------------------------------------------------------------------- opening


def test_open_creates_missing_parents_and_a_private_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "today" / "buffer"
    umask = os.umask(0)
    os.umask(umask)
    with ReplayBuffer.open(path, _config()):
        assert (path / LOCK_FILE).is_file()
        assert (path / LOCK_FILE).stat().st_mode & 0o777 == 0o644 & ~umask  # rw-r--r--, not executable


def test_read_only_open_of_a_directory_that_is_no_buffer_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(BufferIndexError, match="no index here"):
        ReplayBuffer.open(tmp_path, _config(), read_only=True)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_open_raises_its_cause_and_releases_the_lock(tmp_path: Path) -> None:
    (tmp_path / "index.sqlite3").write_bytes(b"this is not an SQLite database " * 64)
    with pytest.raises(BufferIndexError, match="cannot open the index"):
        ReplayBuffer.open(tmp_path, _config())
    (tmp_path / "index.sqlite3").unlink()
    with ReplayBuffer.open(tmp_path, _config()) as buf:  # the failed opener holds no lock
        assert len(buf) == 0


@pytest.mark.parametrize(("fsync", "synchronous"), [("episode", 2), ("segment", 1), ("never", 1)])
def test_index_durability_follows_the_fsync_policy(tmp_path: Path, fsync: str, synchronous: int) -> None:
    """fsync=episode: every committed episode is durable in the index too (SQLite synchronous=FULL)."""
    config = BufferConfig(storage=StorageConfig(fsync=fsync), prefetch=0)  # type: ignore[arg-type]
    with ReplayBuffer.open(tmp_path, config) as buf:
        assert buf.storage.index.fetchall("PRAGMA synchronous") == [(synchronous,)]


def test_open_logs_where_how_much_and_how_long(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _store(buf, 0, 2)
    caplog.set_level(logging.INFO, logger="user.buffer")
    started = time.monotonic()
    with ReplayBuffer.open(tmp_path, _config()):
        elapsed = time.monotonic() - started
    (message,) = [r.getMessage() for r in caplog.records if r.name == "user.buffer"]
    found = re.fullmatch(rf"opened {re.escape(str(tmp_path))}: 10 transitions in ([0-9.]+) s", message)
    assert found is not None, message
    assert float(found.group(1)) <= elapsed + 0.001  # the time it took, not a clock reading


def test_verify_decodes_every_transition_by_default(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        _store(buf, 0, 1)
        row = buf.storage.index.transitions()[1]
    with open(segment_path(tmp_path, "seg_000000"), "r+b") as f:
        f.seek(row.offset + MESSAGE_PREFIX)
        f.write(b"\xff\xff")  # the payload's CDR header: the record is intact, its content no longer decodes
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        report = ro.verify()
        assert not report.ok and any("transition 1: cannot decode" in p for p in report.problems)
        assert ro.verify(decode=False).ok  # the quick check only looks at the files' structure


def test_resume_continues_the_saved_draws_with_this_runs_limits(tmp_path: Path) -> None:
    """A learner restarted with other limiter settings: sampler and sample count as saved, every transition
    on disk (also those stored after the save) counted as inserted, the new ratio and minimum in force."""
    with ReplayBuffer.open(tmp_path, _config(spi=2.0, min_size=1, error_buffer=64.0)) as buf:
        _store(buf, 0, 2)
        buf.sample()
        state = buf.state_dict()
        _store(buf, 2, 1)  # committed after the save
    with ReplayBuffer.open(tmp_path, _config(spi=3.0, min_size=4, error_buffer=32.0)) as again:
        again.resume(state)
        limiter = again.rate_limiter
        assert (limiter.inserts, limiter.samples) == (15, 8)
        assert (limiter.samples_per_insert, limiter.min_size, limiter.error_buffer) == (3.0, 4, 32.0)
        assert again.sampler.state_dict() == state["sampler"]
