"""Typed batches (stacked numpy) and the background prefetch worker."""

from dataclasses import replace

import numpy as np
import pytest

from test.buffer.factories import ACTION_DIM, STATE_DIM, episode
from user.buffer.batch import BatchError, collate
from user.buffer.errors import SampleTimeoutError
from user.buffer.prefetch import Prefetcher


def test_collate_stacks_typed_fields() -> None:
    ts = episode("arm", 3, 6, success=True, intervened=True)
    batch = collate(ts, np.arange(6), decode_images=True)
    assert len(batch) == 6
    assert batch.state.shape == (6, STATE_DIM) and batch.state.dtype == np.float32
    assert batch.action.shape == (6, ACTION_DIM)
    assert batch.images["wrist"].shape == (6, 16, 16, 3) and batch.images["wrist"].dtype == np.uint8
    assert batch.next_images["front"].shape == (6, 16, 16, 3)
    assert batch.done.tolist() == [False] * 5 + [True]
    assert batch.terminated[-1] and batch.success[-1] and batch.intervened.all()
    compressed = collate(ts, np.arange(6), decode_images=False)
    assert compressed.images["wrist"].dtype == object and compressed.images["wrist"][0][:2] == b"\xff\xd8"


def test_collate_names_the_transition_that_does_not_fit() -> None:
    ts = episode("arm", 0, 3, images=False)
    odd = replace(ts[2], observation=replace(ts[2].observation, state=np.zeros(3, dtype=np.float32)))
    with pytest.raises(BatchError, match="transition 12: state has shape"):
        collate([*ts[:2], odd], np.array([10, 11, 12]), decode_images=False)


def test_prefetch_keeps_batches_ready_and_reports_errors() -> None:
    counter = iter(range(1000))

    def produce(_timeout: float) -> int:
        return next(counter)

    pre: Prefetcher[int] = Prefetcher(produce, depth=2)
    assert [pre.get(5.0) for _ in range(3)] == [0, 1, 2]
    pre.close()

    def failing(_timeout: float) -> int:
        raise RuntimeError("disk gone")

    bad: Prefetcher[int] = Prefetcher(failing, depth=1)
    with pytest.raises(RuntimeError, match="disk gone"):
        bad.get(5.0)
    bad.close()


def test_prefetch_get_has_a_deadline() -> None:
    pre: Prefetcher[int] = Prefetcher(lambda _t: None, depth=1)
    with pytest.raises(SampleTimeoutError, match="no batch ready"):
        pre.get(0.2)
    pre.close()
