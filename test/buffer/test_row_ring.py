"""The cached transitions as columns: a batch of cached rows equals what `collate` makes of the same rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from test.buffer.factories import transition
from user.buffer.batch import ROW_ARRAYS, BatchError, TransitionBatch, collate
from user.buffer.cache import TransitionCache
from user.buffer.row_ring import FIRST_SIZE, RowRing
from user.interfaces.domain import Transition


def items(n: int, steps: int = 10) -> list[Transition]:
    out = []
    for k in range(n):
        t = transition("franka_1", k // steps, k % steps, steps, version=k % 3, demo=k % 4 == 0, intervened=k % 5 == 0)
        out.append(dataclasses.replace(t, reward=float(k) / 7.0))
    return out


def assert_same(got: TransitionBatch, want: TransitionBatch) -> None:
    for name in ROW_ARRAYS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.state_names == want.state_names
    for side in ("images", "next_images"):
        g, w = getattr(got, side), getattr(want, side)
        assert g.keys() == w.keys()
        for cam in g:
            assert list(g[cam]) == list(w[cam]), (side, cam)


def test_a_batch_of_cached_rows_is_the_collated_batch() -> None:
    data = items(60)
    cache = TransitionCache(60)
    for i, t in enumerate(data):
        cache.put(i, t)
    indices = np.random.default_rng(3).integers(0, 60, size=40)
    got, held = cache.take(indices)
    assert got is not None and held.all()
    assert_same(got, collate([data[i] for i in indices], indices, decode_images=False))
    assert cache.hits == 40


def test_a_batch_partly_cached_is_filled_with_the_collated_rest() -> None:
    data = items(40)
    cache = TransitionCache(20)
    for i, t in enumerate(data):
        cache.put(i, t)
    indices = np.array([39, 3, 25, 3, 10, 20, 38])
    got, held = cache.take(indices)
    assert got is not None
    assert held.tolist() == [True, False, True, False, False, True, True]
    assert cache.hits == 4
    rows = np.flatnonzero(~held)
    rest = collate([data[i] for i in indices[rows]], indices[rows], decode_images=False)
    assert_same(got.fill(rows, rest), collate([data[i] for i in indices], indices, decode_images=False))


def test_rows_of_other_cameras_do_not_fill_a_batch() -> None:
    data = items(4)
    cache = TransitionCache(4)
    cache.put(0, data[0])
    got, held = cache.take(np.array([0, 1]))
    assert got is not None
    bare = dataclasses.replace(data[1], observation=dataclasses.replace(data[1].observation, images=()))
    rest = collate([bare], np.array([1]), decode_images=False)
    with pytest.raises(BatchError, match="cameras"):
        got.fill(np.flatnonzero(~held), rest)


def test_rows_the_cache_dropped_are_not_taken() -> None:
    data = items(30)
    cache = TransitionCache(10)
    for i, t in enumerate(data):
        cache.put(i, t)
    assert cache.take(np.array([25, 29]))[1].tolist() == [True, True]
    assert cache.take(np.array([25, 19]))[1].tolist() == [True, False]  # 19 left the cache: it is read instead
    cache.set_capacity(2)
    assert cache.take(np.array([27]))[0] is None
    assert cache.take(np.array([28, 29]))[1].all()


def test_the_ring_grows_with_the_cache_and_keeps_its_rows() -> None:
    n = FIRST_SIZE + 300
    data = items(n, steps=50)
    cache = TransitionCache(n)
    for i, t in enumerate(data):
        cache.put(i, t)
    indices = np.array([0, 1, FIRST_SIZE - 1, FIRST_SIZE, n - 1])
    got, held = cache.take(indices)
    assert got is not None and held.all()
    assert_same(got, collate([data[i] for i in indices], indices, decode_images=False))


def test_a_number_in_the_same_slot_is_not_mistaken_for_another() -> None:
    ring = RowRing()
    data = items(3)
    ring.put(5, data[0], 1)
    size = FIRST_SIZE
    assert ring.take(np.array([5 + size]))[0] is None  # same slot, another transition
    got, _ = ring.take(np.array([5]))
    assert got is not None and got.indices.tolist() == [5]


@pytest.mark.parametrize("change", ["state", "camera", "names"])
def test_a_row_of_another_shape_is_not_kept(change: str) -> None:
    data = items(4)
    odd = data[1]
    if change == "state":
        odd = dataclasses.replace(odd, observation=dataclasses.replace(odd.observation, state=np.zeros(3, np.float32)))
    elif change == "camera":
        odd = dataclasses.replace(odd, observation=dataclasses.replace(odd.observation, images=()))
    else:
        names = tuple(f"s{k}" for k in range(odd.observation.state.size))
        obs = dataclasses.replace(odd.observation, state_names=names)
        odd = dataclasses.replace(odd, observation=obs)
    ring = RowRing()
    ring.put(0, data[0], 4)
    ring.put(1, odd, 4)
    ring.put(2, data[2], 4)
    assert ring.take(np.array([0, 2]))[1].all()
    assert ring.take(np.array([0, 1]))[1].tolist() == [True, False]


def test_dropping_a_row_releases_its_image_bytes() -> None:
    data = items(2)
    ring = RowRing()
    ring.put(0, data[0], 2)
    ring.drop(0)
    assert ring.take(np.array([0]))[0] is None
    ring.put(1, data[1], 2)
    ring.drop(0)  # not held any more: nothing else changes
    got, _ = ring.take(np.array([1]))
    assert got is not None and list(got.images["wrist"]) == [data[1].observation.images[0].data]


def test_rows_held_before_the_ring_grows_are_still_there_after() -> None:
    data = items(3 * FIRST_SIZE, steps=100)
    cache = TransitionCache(FIRST_SIZE)
    for i in range(FIRST_SIZE):
        cache.put(i, data[i])
    cache.set_capacity(3 * FIRST_SIZE)  # the cache grows (a cache ratio over a growing buffer): the ring doubles
    for i in range(FIRST_SIZE, len(data)):
        cache.put(i, data[i])
    indices = np.array([0, 1, 7, FIRST_SIZE - 1, FIRST_SIZE, 2 * FIRST_SIZE + 5, len(data) - 1], dtype=np.int32)
    got, held = cache.take(indices)
    assert got is not None and held.dtype == bool and held.all()
    assert got.indices.dtype == np.int64
    assert_same(got, collate([data[i] for i in indices], indices, decode_images=False))


def named(t: Transition, obs: tuple[str, ...], nxt: tuple[str, ...]) -> Transition:
    return dataclasses.replace(
        t,
        observation=dataclasses.replace(t.observation, state_names=obs),
        next_observation=dataclasses.replace(t.next_observation, state_names=nxt),
    )


@pytest.mark.parametrize("next_named", [True, False])
def test_a_batch_carries_the_state_names_collate_gives_it(next_named: bool) -> None:
    data = items(3)
    names = tuple(f"s{k}" for k in range(data[0].observation.state.size))
    rows = [named(t, names, names if next_named else ()) for t in data]
    ring = RowRing()
    for i, t in enumerate(rows):
        ring.put(i, t, 3)
    indices = np.array([2, 0])
    got, held = ring.take(indices)
    assert got is not None and held.all()
    assert got.state_names == names
    assert_same(got, collate([rows[i] for i in indices], indices, decode_images=False))


def test_rows_whose_next_state_names_differ_are_left_to_collate() -> None:
    data = items(2)
    size = data[0].observation.state.size
    rows = [named(t, tuple(f"a{k}" for k in range(size)), tuple(f"b{k}" for k in range(size))) for t in data]
    ring = RowRing()
    for i, t in enumerate(rows):
        ring.put(i, t, 2)
    got, held = ring.take(np.array([0, 1]))
    assert got is None
    assert held.dtype == bool and not held.any()
    with pytest.raises(BatchError, match="state names"):
        collate(rows, np.array([0, 1]), decode_images=False)


def test_an_empty_ring_holds_nothing() -> None:
    got, held = RowRing().take(np.array([0, 1]))
    assert got is None
    assert held.dtype == bool and held.tolist() == [False, False]
