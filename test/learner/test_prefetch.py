"""The prefetcher hands out the batches drawn, in the order drawn, each prepared; errors come out in their place;
the end of the source and `close` end it; a slow source is a timeout, never a hang."""

from __future__ import annotations

import threading

import pytest
import torch

from test.learner.speed_setup import host_batch, tiny_algorithm
from user.buffer.errors import SampleTimeoutError
from user.learner.prefetch import PrefetchClosedError, Prefetcher, PrefetchTimeoutError, batch_tensors

CPU = torch.device("cpu")


def _source(items: list[object]) -> object:
    it = iter(items)

    def draw(timeout_s: float) -> object:
        item = next(it)  # StopIteration at the end: the source ended
        if isinstance(item, BaseException):
            raise item
        return item

    return draw


def test_batches_come_out_prepared_in_the_order_drawn_then_the_end() -> None:
    algo = tiny_algorithm("sac")
    batches = [host_batch(seed=k) for k in range(5)]
    pf = Prefetcher(_source(list(batches)), algo.prepare, CPU, depth=2)  # type: ignore[arg-type]
    try:
        for batch in batches:
            got = pf.get(timeout_s=10.0).batch()
            want = algo.prepare(batch)
            assert torch.equal(got.action, want.action) and torch.equal(got.reward, want.reward)
            assert torch.equal(got.obs.images["left"], want.obs.images["left"])
        with pytest.raises(PrefetchClosedError):
            pf.get(timeout_s=10.0)
        with pytest.raises(PrefetchClosedError):
            pf.get(timeout_s=10.0)
    finally:
        assert pf.close()


def test_draw_errors_come_out_in_their_place_and_prepare_errors_from_the_batch() -> None:
    def prepare(x: int) -> object:
        if x == 3:
            raise ValueError("cannot prepare 3")
        return x

    items: list[object] = [1, OSError("segment gone"), 3, 4]
    pf = Prefetcher(_source(items), prepare, CPU, depth=1)  # type: ignore[arg-type]
    try:
        assert pf.get(10.0).batch() == 1  # type: ignore[comparison-overlap]
        with pytest.raises(OSError, match="segment gone"):
            pf.get(10.0)
        third = pf.get(10.0)
        with pytest.raises(ValueError, match="cannot prepare 3"):
            third.batch()
        assert pf.get(10.0).batch() == 4  # type: ignore[comparison-overlap]
    finally:
        assert pf.close()


def test_a_source_with_nothing_yet_is_a_timeout_and_close_ends_the_worker() -> None:
    release = threading.Event()
    drawn: list[int] = []

    def draw(timeout_s: float) -> int:
        if not release.wait(timeout_s):
            raise SampleTimeoutError("nothing allowed yet")  # the worker draws again
        drawn.append(len(drawn))
        return drawn[-1]

    pf = Prefetcher[int](draw, lambda x: x, CPU, timeouts=(SampleTimeoutError,))  # type: ignore[arg-type,return-value]
    with pytest.raises(PrefetchTimeoutError):
        pf.get(timeout_s=0.3)
    release.set()
    assert pf.get(timeout_s=10.0).batch() == 0  # type: ignore[comparison-overlap]
    assert pf.get(timeout_s=10.0).batch() == 1  # type: ignore[comparison-overlap]
    assert pf.close(timeout_s=5.0)
    with pytest.raises(PrefetchClosedError):
        pf.get(timeout_s=1.0)


def test_the_tensors_a_prepared_batch_holds_skip_the_chunks_it_has_not() -> None:
    """What a side stream's batch is recorded on: every tensor it holds, none for the action chunks of a batch
    without them (a None has no stream to record)."""
    algorithm = tiny_algorithm("sac")
    batch = algorithm.prepare(host_batch())
    assert batch.action_chunk is None
    tensors = batch_tensors(batch)
    assert all(isinstance(t, torch.Tensor) for t in tensors)
    assert len(tensors) == 5 + 2 * (1 + len(batch.obs.images))  # 5 per-row fields; state and cameras, obs and next
