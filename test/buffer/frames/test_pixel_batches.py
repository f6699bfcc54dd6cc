"""Pixel batches through the replay buffer: sampling is unchanged by the pixel pipeline, pixels are those of the
stored frames, and the time `sample` waits for a batch being made is counted."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import CAMERAS, episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, SamplerConfig, StorageConfig, TransitionBatch
from user.buffer.config import FramesConfig
from user.buffer.frames.frame_decode import Decoding, FrameDecoder
from user.interfaces.images import decode_image

BATCH = 8
EPISODES = 4
STEPS = 6
SAMPLE_S = 10.0
GATE_S = 10.0


def config(*, prefetch: int = 2, decode: bool = True, cache_size: int = 1000, **frames: object) -> BufferConfig:
    return BufferConfig(
        storage=StorageConfig(segment_max_episodes=2, cache_size=cache_size),
        sampler=SamplerConfig(kind="uniform", seed=11),
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=BATCH,
        prefetch=prefetch,
        decode_images=decode,
        frames=FramesConfig(**{"workers": 2, "device": "cpu", **frames}),  # type: ignore[arg-type]
    )


def fill(buf: ReplayBuffer) -> None:
    for e in range(EPISODES):
        buf.add_episode(episode("a", e, STEPS))


def sampled_indices(directory: Path, cfg: BufferConfig, batches: int) -> list[list[int]]:
    with ReplayBuffer.open(directory, cfg) as buf:
        fill(buf)
        drawn = []
        for _ in range(batches):
            batch = buf.sample(timeout_s=SAMPLE_S)
            assert isinstance(batch.images["wrist"][0], np.ndarray) == cfg.decode_images
            drawn.append(batch.indices.tolist())
        return drawn


def assert_pixels_of_stored_frames(buf: ReplayBuffer, batch: TransitionBatch) -> None:
    """The batch's pixels are `decode_image` of the frames stored for its transitions."""
    for row, t in enumerate(buf.get(batch.indices)):
        for obs, field in ((t.observation, "images"), (t.next_observation, "next_images")):
            frames = {img.camera: img.data for img in obs.images}
            for cam in CAMERAS:
                pixels = getattr(batch, field)[cam][row]
                assert np.array_equal(pixels, decode_image(frames[cam])), f"{field}[{cam!r}] of row {row}"


def test_the_pixel_pipeline_does_not_change_sampling(tmp_path: Path) -> None:
    batches = 40
    runs = {
        (prefetch, decode): sampled_indices(
            tmp_path / f"p{prefetch}-d{decode}", config(prefetch=prefetch, decode=decode), batches
        )
        for prefetch, decode in itertools.product((0, 2), (False, True))
    }
    reference = runs[(0, False)]
    assert all(len(b) == BATCH for b in reference)
    for key, drawn in runs.items():
        assert drawn == reference, f"prefetch, decode_images = {key} drew other transitions"
    counts = {key: np.bincount(np.ravel(drawn), minlength=EPISODES * STEPS) for key, drawn in runs.items()}
    for key, count in counts.items():
        assert np.array_equal(count, counts[(0, False)]), key
    stored = EPISODES * STEPS
    expected = batches * BATCH / stored
    chi2 = float(((counts[(2, True)] - expected) ** 2 / expected).sum())
    assert counts[(2, True)].min() > 0 and chi2 < 3 * (stored - 1)  # uniform over every stored transition


@pytest.mark.parametrize("prefetch", [0, 2])
def test_pixels_of_cached_transitions_are_the_stored_frames(tmp_path: Path, prefetch: int) -> None:
    with ReplayBuffer.open(tmp_path, config(prefetch=prefetch)) as buf:
        fill(buf)
        assert buf.frames is not None and buf.frames.wait_primed(SAMPLE_S)
        reads = buf.storage.disk_reads
        for _ in range(6):
            assert_pixels_of_stored_frames(buf, buf.sample(timeout_s=SAMPLE_S))
        assert buf.storage.disk_reads == reads  # all drawn from memory
        assert buf.frames.cache.stats.hits > 0 and buf.frames.cache.stats.misses == 0


@pytest.mark.parametrize("prefetch", [0, 2])
def test_pixels_of_transitions_read_from_disk_are_the_stored_frames(tmp_path: Path, prefetch: int) -> None:
    with ReplayBuffer.open(tmp_path, config(prefetch=prefetch, cache_size=3)) as buf:
        fill(buf)
        assert buf.frames is not None and buf.frames.wait_primed(SAMPLE_S)
        batches = [buf.sample(timeout_s=SAMPLE_S) for _ in range(6)]
        assert buf.storage.disk_reads > 0  # most transitions are not in the 3-transition cache
        assert buf.frames.cache.stats.misses > 0  # nor their frames in the frame cache
        for batch in batches:
            assert_pixels_of_stored_frames(buf, batch)


def test_pixels_without_a_frame_cache_are_the_stored_frames(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, config(cache_mb=0.0, prime=False)) as buf:
        fill(buf)
        for _ in range(4):
            assert_pixels_of_stored_frames(buf, buf.sample(timeout_s=SAMPLE_S))
        assert buf.frames is not None and len(buf.frames.cache) == 0


class GatedDecoder:
    """A decoder that holds the first frames it is given until `gate` opens (`entered` says they arrived)."""

    def __init__(self, inner: FrameDecoder) -> None:
        self.inner = inner
        self.name = "gated"
        self.entered = threading.Event()
        self.gate = threading.Event()

    def _hold(self) -> None:
        self.entered.set()
        if not self.gate.wait(GATE_S):
            raise RuntimeError("the gate did not open")

    def decode_one(self, data: bytes) -> np.ndarray:
        self._hold()
        return self.inner.decode_one(data)

    def decode_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> None:
        self._hold()
        self.inner.decode_into(frames, out)

    def start_into(self, frames: Sequence[bytes], out: np.ndarray | Sequence[np.ndarray]) -> Decoding:
        self._hold()
        return self.inner.start_into(frames, out)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("prefetch", [0, 2])
def test_sample_calls_are_counted(tmp_path: Path, prefetch: int) -> None:
    with ReplayBuffer.open(tmp_path, config(prefetch=prefetch)) as buf:
        fill(buf)
        assert (buf.sample_calls, buf.wait_s) == (0, 0.0)
        waited = 0.0
        for calls in range(1, 6):
            buf.sample(timeout_s=SAMPLE_S)
            assert buf.sample_calls == calls
            assert buf.wait_s >= waited >= 0.0
            waited = buf.wait_s


def test_wait_s_grows_while_sample_awaits_a_batch_being_made(tmp_path: Path) -> None:
    with ReplayBuffer.open(tmp_path, config(prefetch=2, cache_mb=0.0, prime=False)) as buf:
        fill(buf)
        assert buf.frames is not None
        gated = GatedDecoder(buf.frames.decoder)
        buf.frames.decoder = gated

        def open_when_held() -> None:
            if gated.entered.wait(GATE_S):
                gated.gate.set()

        opener = threading.Thread(target=open_when_held)
        opener.start()
        batch = buf.sample(timeout_s=SAMPLE_S)  # the worker's decoding is held until the opener sees it
        opener.join(GATE_S)
        assert not opener.is_alive() and gated.gate.is_set()
        assert buf.sample_calls == 1 and buf.wait_s > 0.0
        assert_pixels_of_stored_frames(buf, batch)
