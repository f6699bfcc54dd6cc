"""The frame stage: batches of JPEG bytes become the pixels `decode_image` gives, each distinct frame decoded once."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import CAMERAS, episode
from user.buffer.batch import BatchError, TransitionBatch, collate
from user.buffer.config import FramesConfig
from user.buffer.errors import BufferError
from user.buffer.frames.frame_decode import CpuDecoder, Decoding
from user.buffer.frames.frame_stage import FrameStage, frame_capacity
from user.interfaces.domain import Transition
from user.interfaces.images import decode_image

PRIME_S = 10.0

MakeStage = Callable[..., FrameStage]


class CountingDecoder:
    """A CPU decoder that counts the frames it decodes."""

    def __init__(self) -> None:
        self.inner = CpuDecoder(2, None)
        self.name = "counting"
        self.decoded = 0
        self._lock = threading.Lock()

    def _count(self, n: int) -> None:
        with self._lock:
            self.decoded += n

    def decode_one(self, data: bytes) -> np.ndarray:
        self._count(1)
        return self.inner.decode_one(data)

    def decode_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> None:
        self._count(len(frames))
        self.inner.decode_into(frames, out)

    def start_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> Decoding:
        self._count(len(frames))
        return self.inner.start_into(frames, out)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def make_stage() -> Iterator[MakeStage]:
    """FrameStages (cache_mb, prime, optional decoder), closed at the end of the test."""
    made: list[FrameStage] = []

    def make(cache_mb: float = 64.0, prime: bool = True, decoder: CountingDecoder | None = None) -> FrameStage:
        stage = FrameStage(FramesConfig(cache_mb=cache_mb, workers=2, device="cpu", prime=prime), decoder)
        made.append(stage)
        return stage

    yield make
    for stage in made:
        stage.close()


def batch_of(transitions: Sequence[Transition]) -> TransitionBatch:
    return collate(transitions, np.arange(len(transitions)), decode_images=False)


def frames_of(transitions: Sequence[Transition], camera: str) -> list[bytes]:
    """The distinct frames of `camera` in `transitions`."""
    seen: dict[bytes, None] = {}
    for t in transitions:
        for obs in (t.observation, t.next_observation):
            seen.update({img.data: None for img in obs.images if img.camera == camera})
    return list(seen)


def assert_pixels_match(batch: TransitionBatch, pixels: TransitionBatch) -> None:
    assert sorted(pixels.images) == sorted(CAMERAS) and sorted(pixels.next_images) == sorted(CAMERAS)
    for cam in CAMERAS:
        for field in ("images", "next_images"):
            frames, decoded = getattr(batch, field)[cam], getattr(pixels, field)[cam]
            assert decoded.dtype == np.uint8 and decoded.shape == (len(frames), 16, 16, 3)
            for k, data in enumerate(frames):
                assert np.array_equal(decoded[k], decode_image(data)), f"{field}[{cam!r}][{k}]"


def test_pixels_of_held_frames_match_decode_image(make_stage: MakeStage) -> None:
    stage = make_stage()
    transitions = episode("a", 0, 6) + episode("a", 1, 6)
    stage.follow(2 * len(transitions))  # short episodes: more last frames than frame_capacity counts on
    assert stage.prime(transitions[:6]) and stage.prime(transitions[6:])
    assert stage.wait_primed(PRIME_S)
    batch = batch_of(transitions[::-1])
    assert_pixels_match(batch, stage.pixels(batch))
    assert stage.cache.stats.misses == 0 and stage.cache.stats.hits == 2 * 2 * len(transitions)


@pytest.mark.parametrize(("cache_mb", "prime"), [(0.0, False), (64.0, False)])
def test_pixels_of_frames_not_held_match_decode_image(make_stage: MakeStage, cache_mb: float, prime: bool) -> None:
    stage = make_stage(cache_mb, prime)
    transitions = episode("a", 0, 6) + episode("a", 1, 6)
    stage.follow(len(transitions))
    stage.prime(transitions)
    assert len(stage.cache) == 0
    batch = batch_of(transitions)
    assert_pixels_match(batch, stage.pixels(batch))
    assert stage.cache.stats.hits == 0
    again = batch_of(transitions[3:9])  # second batch: from the cache when it has room, else decoded again
    assert_pixels_match(again, stage.pixels(again))


def test_a_frame_shared_by_neighbours_is_decoded_once(make_stage: MakeStage) -> None:
    counting = CountingDecoder()
    stage = make_stage(0.0, False, counting)
    transitions = episode("a", 0, 5)
    drawn = [*transitions, transitions[2], transitions[2]]  # next obs t is obs t+1; one transition drawn thrice
    batch = batch_of(drawn)
    assert_pixels_match(batch, stage.pixels(batch))
    distinct = sum(len(frames_of(transitions, cam)) for cam in CAMERAS)
    assert counting.decoded == distinct < 2 * 2 * len(drawn)


def test_frames_decoded_for_a_batch_are_kept_when_there_is_room(make_stage: MakeStage) -> None:
    counting = CountingDecoder()
    stage = make_stage(64.0, False, counting)
    transitions = episode("a", 0, 5)
    stage.follow(len(transitions))
    batch = batch_of(transitions)
    stage.pixels(batch)
    decoded = counting.decoded
    assert_pixels_match(batch, stage.pixels(batch))
    assert counting.decoded == decoded  # the second batch decodes nothing


def test_a_corrupt_frame_raises_a_batch_error_naming_the_camera(make_stage: MakeStage) -> None:
    stage = make_stage(0.0, False)
    batch = batch_of(episode("a", 0, 4))
    front = batch.images["front"].copy()
    front[2] = b"\xff\xd8 not a jpeg"
    with pytest.raises(BatchError, match="'front'"):
        stage.pixels(dataclasses.replace(batch, images={**batch.images, "front": front}))


@pytest.mark.parametrize("row", [0, 2])
def test_a_corrupt_frame_fails_the_batch_at_finish(make_stage: MakeStage, row: int) -> None:
    stage = make_stage(0.0, False)
    batch = batch_of(episode("a", 0, 4))
    wrist = batch.images["wrist"].copy()
    wrist[row] = b"\xff\xd8 not a jpeg"  # row 0: the frame that would tell the camera's shape
    pending = stage.start(dataclasses.replace(batch, images={**batch.images, "wrist": wrist}))
    with pytest.raises(BatchError, match="'wrist'"):
        stage.finish(pending)
    assert_pixels_match(batch, stage.pixels(batch))  # the next batch is not affected


def test_batches_started_before_the_last_finished_match_decode_image(make_stage: MakeStage) -> None:
    stage = make_stage(64.0, False)
    transitions = episode("a", 0, 6) + episode("a", 1, 6)
    stage.follow(2)  # a small frame cache: some frames held, most decoded
    batches = [batch_of(transitions[k : k + 5]) for k in range(0, 8, 2)]
    pending = [stage.start(b) for b in batches[:2]]
    for k, batch in enumerate(batches):  # the pipeline of the prefetch worker: start the next, finish the last
        if k + 2 < len(batches):
            pending.append(stage.start(batches[k + 2]))
        assert_pixels_match(batch, stage.finish(pending[k]))


def test_prime_holds_an_episode_and_is_off_when_disabled(make_stage: MakeStage) -> None:
    transitions = episode("a", 0, 5)
    off = make_stage(64.0, False)
    off.follow(len(transitions))
    assert off.prime(transitions) is False
    assert off.wait_primed(PRIME_S) and len(off.cache) == 0
    on = make_stage(64.0, True)
    on.follow(len(transitions))
    assert on.prime(transitions) is True
    assert on.wait_primed(PRIME_S)
    for cam in CAMERAS:
        assert all((cam, data) in on.cache for data in frames_of(transitions, cam))


def test_priming_without_a_frame_cache_is_quiet(make_stage: MakeStage, caplog: pytest.LogCaptureFixture) -> None:
    stage = make_stage(0.0, True)
    stage.follow(10)
    with caplog.at_level(logging.WARNING, logger="user.buffer.frames"):
        stage.prime(episode("a", 0, 5))
        assert stage.wait_primed(PRIME_S)
    assert [r.getMessage() for r in caplog.records] == []


@pytest.mark.parametrize("transitions", [0, 1, 15, 16, 17, 1000])
def test_follow_sets_the_frame_capacity(make_stage: MakeStage, transitions: int) -> None:
    stage = make_stage()
    stage.follow(transitions)
    assert stage.cache.capacity == frame_capacity(transitions)
    assert frame_capacity(transitions) >= transitions + (transitions > 0)  # and room for episodes' last frames


def test_misses_fill_free_room_but_never_evict_held_frames(make_stage: MakeStage) -> None:
    stage = make_stage()
    first, second = episode("a", 0, 5), episode("a", 1, 5)
    stage.follow(2)
    room = stage.cache.capacity
    assert stage.prime(first) and stage.wait_primed(PRIME_S)
    held = {cam: [d for d in frames_of(first, cam) if (cam, d) in stage.cache] for cam in CAMERAS}
    assert all(len(h) == room for h in held.values())
    evicted = stage.cache.stats.evicted

    batch = batch_of(second)
    assert_pixels_match(batch, stage.pixels(batch))
    assert stage.cache.stats.evicted == evicted
    for cam in CAMERAS:
        assert all((cam, d) in stage.cache for d in held[cam])
        assert not any((cam, d) in stage.cache for d in frames_of(second, cam))

    stage.follow(len(first) + len(second))  # room now: the next batch's misses are kept
    assert_pixels_match(batch, stage.pixels(batch))
    assert stage.cache.stats.evicted == evicted
    for cam in CAMERAS:
        assert all((cam, d) in stage.cache for d in held[cam] + frames_of(second, cam))


class GatedDecoder(CountingDecoder):
    """A counting decoder whose `decode_one` waits (bounded) until the gate opens."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def decode_one(self, data: bytes) -> np.ndarray:
        assert self.gate.wait(PRIME_S), "the test never opened the gate"
        return super().decode_one(data)


def test_a_full_backlog_skips_decoding_ahead_and_counts_it(make_stage: MakeStage) -> None:
    from user.buffer.frames.frame_stage import MAX_PENDING_EPISODES

    decoder = GatedDecoder()
    stage = make_stage(decoder=decoder)
    stage.follow(10_000)
    episodes = [episode("franka_1", e, 2) for e in range(MAX_PENDING_EPISODES + 2)]
    assert all(stage.prime(ep) for ep in episodes[:MAX_PENDING_EPISODES])
    assert not stage.wait_primed(0.05)  # the first is still decoding: the deadline answers
    assert not stage.prime(episodes[-2])
    assert not stage.prime(episodes[-1])
    assert stage.primed_skipped == 2
    decoder.gate.set()
    assert stage.wait_primed(PRIME_S)
    assert stage.prime(episodes[-1])  # room again
    assert stage.wait_primed(PRIME_S)
    assert stage.primed_skipped == 2


def test_priming_transitions_without_images_is_done_at_once(make_stage: MakeStage) -> None:
    stage = make_stage()
    assert stage.prime(episode("franka_1", 0, 3, images=False))
    assert stage.wait_primed(0.0)


def test_a_frame_that_does_not_decode_ahead_is_logged_once_per_cause(
    make_stage: MakeStage, caplog: pytest.LogCaptureFixture
) -> None:
    stage = make_stage()
    stage.follow(100)
    bad = episode("franka_1", 0, 2)
    broken = [
        dataclasses.replace(
            t,
            observation=dataclasses.replace(
                t.observation,
                images=tuple(dataclasses.replace(img, data=b"not a jpeg") for img in t.observation.images),
            ),
        )
        for t in bad
    ]
    with caplog.at_level(logging.WARNING, logger="user.buffer.frames"):
        for _ in range(3):
            assert stage.prime(broken)
            assert stage.wait_primed(PRIME_S)
    warnings = [r for r in caplog.records if "not decoded ahead" in r.getMessage()]
    assert len(warnings) == 1
    assert "ImageCodecError" in warnings[0].getMessage() and "10 bytes" in warnings[0].getMessage()


def test_a_camera_without_next_images_is_named(make_stage: MakeStage) -> None:
    batch = batch_of(episode("franka_1", 0, 2))
    lopsided = dataclasses.replace(batch, next_images={"front": batch.next_images["front"]})
    with pytest.raises(BatchError, match="'wrist' is in the observations but not in the next"):
        make_stage().pixels(lopsided)


def test_closing_stops_decoding_ahead(make_stage: MakeStage) -> None:
    decoder = GatedDecoder()
    stage = make_stage(decoder=decoder)
    stage.follow(100)
    assert stage.prime(episode("franka_1", 0, 5))
    stage.close()
    decoder.gate.set()
    assert stage.wait_primed(PRIME_S)
    assert len(stage.cache) <= 1  # the frame being decoded at close may land; none after it


def test_the_thread_decoding_ahead_runs_at_the_lowest_priority() -> None:
    from user.buffer.frames.frame_stage import _yield_cpu

    seen: list[int] = []

    def probe() -> None:
        _yield_cpu()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join(PRIME_S)
    assert seen == [19]


_STATE_ONLY = """
import sys, tempfile
from test.buffer.factories import episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer
with ReplayBuffer.open(tempfile.mkdtemp(), BufferConfig(prefetch=0, rate_limiter=RateLimiterConfig(min_size=1))) as b:
    for t in episode("arm", 0, 3, images=False):
        b.add(t)
    b.sample(2)
print("torch" in sys.modules)
"""


def test_a_buffer_that_decodes_no_frame_does_not_import_torch() -> None:
    """Choosing the decoder's device imports torch (1.5 s here): a state-only buffer, or `user buffer info`,
    must not pay it on every open (it did, and a 1M-transition reopen went from under 5 s to 6.4 s)."""
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "src")])}
    out = subprocess.run([sys.executable, "-c", _STATE_ONLY], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "False", out.stderr


def test_the_decoder_is_made_at_the_first_frame_and_not_after_close() -> None:
    stage = FrameStage(FramesConfig(device="cpu", prime=False))
    assert stage._decoder is None
    steps = episode("arm", 0, 2)
    batch = stage.pixels(collate(steps, np.arange(2), decode_images=False))
    assert isinstance(stage._decoder, CpuDecoder) and batch.images["wrist"].shape == (2, 16, 16, 3)
    stage.close()
    late = FrameStage(FramesConfig(device="cpu", prime=False))
    late.close()
    with pytest.raises(BufferError, match="frame stage is closed"):
        late.decoder  # noqa: B018 - the property makes it
